package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
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
	// Not JSON, with a byte that is not UTF-8 inside the key: the
	// message drops such bytes, so the key is removed after that.
	f.Add([]byte("<p>" + fuzzKey[:8] + "\xff" + fuzzKey[8:] + "</p>"))
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

// FuzzStream reads bodies of streamed replies as Stream does, seeded with
// the recorded streams. Whatever comes, the fragments of text and of each
// call's arguments must make the answer's text and calls, each fragment
// must name its call, and no error may hold the API key.
func FuzzStream(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "openai", "streams", "*.sse"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no recorded streams: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"[\"}},{\"index\":0,\"id\":\"a\"}]}}]}\r\n\r\ndata: {\"error\":\"" + fuzzKey + "\"}\n\n"))
	p := New(Options{APIKey: fuzzKey, BaseURL: "http://127.0.0.1:0"})
	f.Fuzz(func(t *testing.T, in []byte) {
		var text strings.Builder
		args := map[int]string{}
		names := map[int][2]string{}
		emit := func(d sampler.Delta) {
			text.WriteString(d.Text)
			if tc := d.ToolCall; tc != nil {
				args[tc.Index] += tc.Arguments
				if n, ok := names[tc.Index]; ok && n != [2]string{tc.ID, tc.Name} && n[0] != "call_"+strconv.Itoa(tc.Index) {
					t.Fatalf("call %d named %v, then %q %q", tc.Index, n, tc.ID, tc.Name)
				}
				names[tc.Index] = [2]string{tc.ID, tc.Name}
			}
		}
		resp, err := p.readStream(context.Background(), http.StatusOK, bytes.NewReader(in), emit, func() {})
		if err != nil {
			if strings.Contains(err.Error(), fuzzKey) {
				t.Fatalf("error holds the key: %v", err)
			}
			return
		}
		var got strings.Builder
		calls := 0
		for _, c := range resp.Content {
			switch c.Type {
			case sampler.BlockText:
				got.WriteString(c.Text)
			case sampler.BlockToolUse:
				if a := toolInput(args[calls]); !bytes.Equal(a, c.Input) {
					t.Fatalf("call %d: fragments make %s, the answer has %s", calls, a, c.Input)
				}
				if n := names[calls]; n[1] != c.Name {
					t.Fatalf("call %d: fragments name %q, the answer %q", calls, n[1], c.Name)
				}
				calls++
			}
		}
		if calls != len(args) {
			t.Fatalf("fragments of %d calls, the answer has %d", len(args), calls)
		}
		// Text and refusal fragments may interleave; the answer holds the
		// text, then the refusal.
		if got.Len() != text.Len() {
			t.Fatalf("fragments make %d bytes of text, the answer %d", text.Len(), got.Len())
		}
	})
}
