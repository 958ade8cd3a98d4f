package anthropic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
)

// FuzzReply decodes Messages API answers as Sample does: the SDK's
// Message, then sampled's response, with and without the tool-as-schema
// trick, and the error body of a failed call. What comes out is sent to
// clients: it must encode, weigh no more than escaping makes of the answer,
// and never hold the API key.
func FuzzReply(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "anthropic", "replies", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no replies: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"message","content":[{"type":"tool_use","id":"t","name":"respond","input":{"value":[1]}},{"type":"thinking","thinking":"x"}],"stop_reason":"tool_use"}`))
	f.Add([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"` + testKey + `"}}`))
	p := New(Options{APIKey: testKey, BaseURL: "http://127.0.0.1:0"})
	f.Fuzz(func(t *testing.T, in []byte) {
		limit := 6*len(in) + 256
		var msg sdk.Message
		// As the SDK decodes a reply: encoding/json checks the syntax
		// before the Message's own decoder, which is lenient, runs.
		if json.Unmarshal(in, &msg) == nil {
			for _, tr := range []*trick{nil, {}, {wrapped: true}} {
				resp := response(&msg, tr)
				out, err := json.Marshal(resp.Content)
				if err != nil {
					t.Fatalf("content of %q does not encode: %v", in, err)
				}
				if len(out) > limit {
					t.Fatalf("%d bytes of answer make %d bytes of content", len(in), len(out))
				}
			}
			if msg.Type == "error" {
				if s := p.errorObject(msg.RawJSON(), nil).Error(); strings.Contains(s, testKey) || len(s) > limit {
					t.Fatalf("error holds the key or is too long: %q", s)
				}
			}
		}
		body := apiErrorBody(string(in))
		// Each invalid UTF-8 byte decodes to U+FFFD, three bytes: the
		// bound is three times the body.
		if len(body.Error.Message)+len(body.Error.Type) > 3*len(in) {
			t.Fatalf("an error body of %d bytes decodes to more", len(in))
		}
	})
}
