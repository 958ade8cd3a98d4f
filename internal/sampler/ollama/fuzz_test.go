package ollama

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzReply decodes /api/chat answers as Sample does: a 200's body into a
// sampler.Response, and any body as an error reply. What comes out is sent
// to clients: it must encode and weigh no more than escaping makes of the
// answer; error messages stay within maxMessage runes.
func FuzzReply(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "ollama", "replies", "*.json"))
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
	f.Add([]byte(`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}},{"function":{"name":"f","arguments":null}}]},"done":true}`))
	f.Add([]byte(`{"error":"model 'x' not found"}`))
	f.Add([]byte(`<html>502</html>`))
	f.Fuzz(func(t *testing.T, in []byte) {
		limit := 6*len(in) + 256
		var cr chatResponse
		if json.Unmarshal(in, &cr) == nil {
			resp := toResponse(&cr)
			out, err := json.Marshal(resp.Content)
			if err != nil {
				t.Fatalf("content of %q does not encode: %v", in, err)
			}
			if len(out) > limit {
				t.Fatalf("%d bytes of answer make %d bytes of content", len(in), len(out))
			}
		}
		if msg := errorMessage(in, http.StatusInternalServerError); utf8.RuneCountInString(msg) > maxMessage {
			t.Fatalf("error message of %d runes", utf8.RuneCountInString(msg))
		}
	})
}
