package host

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/tools"
)

// TestExtensions reads the client-run loop's members from _meta, and names
// the path of a bad one. (On stdio the registry moves the members of the
// params there, _meta's own winning: tools' TestWithRequestMeta.)
func TestExtensions(t *testing.T) {
	tests := []struct {
		name, meta   string
		wantN        int // 0: no loop
		wantPatterns string
		wantErr      string
	}{
		{name: "none"},
		{name: "other members", meta: `{"progressToken":1}`},
		{name: "in _meta", meta: `{"maxIterations":4,"allowedToolPatterns":["a*","b"]}`, wantN: 4, wantPatterns: "a* b"},
		{name: "fraction", meta: `{"maxIterations":2.5,"allowedToolPatterns":["y"]}`, wantErr: "/_meta/maxIterations: want an integer"},
		{name: "too many", meta: `{"maxIterations":101,"allowedToolPatterns":["y"]}`, wantErr: "/_meta/maxIterations: want an integer from 1 to 100"},
		{name: "no patterns", meta: `{"maxIterations":2}`, wantErr: "/_meta/allowedToolPatterns: required"},
		{name: "patterns alone", meta: `{"allowedToolPatterns":["y"]}`, wantErr: "/_meta/maxIterations: required"},
		{name: "empty patterns", meta: `{"maxIterations":2,"allowedToolPatterns":[]}`, wantErr: "/_meta/allowedToolPatterns: want a non-empty array"},
		{name: "bad pattern", meta: `{"maxIterations":2,"allowedToolPatterns":["ok","["]}`, wantErr: "/_meta/allowedToolPatterns/1"},
		{name: "meta not an object", meta: `[1]`, wantErr: "/_meta: must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var meta []byte
			if tt.meta != "" {
				meta = []byte(tt.meta)
			}
			ext, err := extensions(meta)
			if tt.wantErr != "" {
				var se *tools.SamplingError
				if !errors.As(err, &se) || se.Code != tools.CodeInvalidParams || !strings.Contains(se.Message, tt.wantErr) {
					t.Fatalf("err = %v, want -32602 naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := ext.maxIterations
			if got := fmt.Sprint(ext.patterns); n != tt.wantN || got != "["+tt.wantPatterns+"]" {
				t.Errorf("got %d %q, want %d %q", n, ext.patterns, tt.wantN, tt.wantPatterns)
			}
		})
	}
}
