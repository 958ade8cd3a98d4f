package host

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/tools"
)

// TestExtensions reads the client-run loop's members from the params or
// from _meta (which wins), and names the path of a bad one.
func TestExtensions(t *testing.T) {
	tests := []struct {
		name, params, meta string
		wantN              int // 0: no loop
		wantPatterns       string
		wantErr            string
	}{
		{name: "none", params: `{"maxTokens":5}`},
		{name: "in params", params: `{"maxIterations":3,"allowedToolPatterns":["std__*"]}`, wantN: 3, wantPatterns: "std__*"},
		{name: "in _meta", meta: `{"maxIterations":4,"allowedToolPatterns":["a*","b"]}`, wantN: 4, wantPatterns: "a* b"},
		{name: "_meta wins", params: `{"maxIterations":3,"allowedToolPatterns":["x"]}`, meta: `{"maxIterations":4,"allowedToolPatterns":["y"]}`, wantN: 4, wantPatterns: "y"},
		{name: "fraction", meta: `{"maxIterations":2.5,"allowedToolPatterns":["y"]}`, wantErr: "/_meta/maxIterations: want an integer"},
		{name: "too many", params: `{"maxIterations":101,"allowedToolPatterns":["y"]}`, wantErr: "/maxIterations: want an integer from 1 to 100"},
		{name: "no patterns", meta: `{"maxIterations":2}`, wantErr: "/_meta/allowedToolPatterns: required"},
		{name: "empty patterns", meta: `{"maxIterations":2,"allowedToolPatterns":[]}`, wantErr: "/_meta/allowedToolPatterns: want a non-empty array"},
		{name: "bad pattern", meta: `{"maxIterations":2,"allowedToolPatterns":["ok","["]}`, wantErr: "/_meta/allowedToolPatterns/1"},
		{name: "meta not an object", meta: `[1]`, wantErr: "/_meta: must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := tt.params
			if params == "" {
				params = "{}"
			}
			var meta []byte
			if tt.meta != "" {
				meta = []byte(tt.meta)
			}
			ext, err := extensions([]byte(params), meta)
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
			n := 0
			if ext.loop() {
				n = *ext.maxIterations
			}
			if got := fmt.Sprint(ext.patterns); n != tt.wantN || got != "["+tt.wantPatterns+"]" {
				t.Errorf("got %d %q, want %d %q", n, ext.patterns, tt.wantN, tt.wantPatterns)
			}
		})
	}
}
