package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/chat"
)

// fuzzKey is the API key of the fuzzed provider; replies may echo it and
// no error may.
const fuzzKey = "sk-fuzz-0123456789abcdef"

// seedReplies adds the wire examples under testdata/openai/<dir> to the
// corpus.
func seedReplies(f *testing.F, dirs ...string) {
	f.Helper()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join("testdata", "openai", dir, "*.json"))
		if err != nil || len(files) == 0 {
			f.Fatalf("no examples in %s: %v", dir, err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzChatResponse decodes replies of POST /chat/completions as Sample
// does: a 200's body into a sampler.Response, and any body as an error
// reply. What comes out is sent to clients: it must encode, weigh no more
// than escaping makes of the reply, and never hold the API key.
func FuzzChatResponse(f *testing.F) {
	seedReplies(f, "replies", "errors")
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image"}],"tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]},"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"error":{"message":["a","b"],"type":"t","param":"p","code":42}}`))
	f.Add([]byte(`{"error":"` + fuzzKey + ` is not valid"}`))
	p := New(Options{APIKey: fuzzKey, BaseURL: "http://127.0.0.1:0"})
	f.Fuzz(func(t *testing.T, in []byte) {
		limit := 6*len(in) + 256
		var cr chat.Response
		if json.Unmarshal(in, &cr) == nil {
			resp, err := p.decodeResponse(http.StatusOK, &cr)
			if err != nil {
				if msg := err.Error(); strings.Contains(msg, fuzzKey) || len(msg) > limit {
					t.Fatalf("error of %d bytes holds the key or is too long: %q", len(in), msg)
				}
			} else {
				out, err := json.Marshal(resp.Content)
				if err != nil {
					t.Fatalf("content of %q does not encode: %v", in, err)
				}
				if len(out) > limit {
					t.Fatalf("%d bytes of reply make %d bytes of content", len(in), len(out))
				}
			}
		}
		err := p.statusError(&http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader(in))})
		if msg := err.Error(); strings.Contains(msg, fuzzKey) || len(msg) > maxErrorBytes+1024 {
			t.Fatalf("status error holds the key or is too long: %q", msg)
		}
	})
}
