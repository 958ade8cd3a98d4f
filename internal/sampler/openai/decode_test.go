package openai

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sampled/sampled/internal/sampler"
)

// checkDecodeReply fails unless decodeReply gives in what
// sampler.DecodeReply gives it, and reports whether the token reader read
// it alone.
func checkDecodeReply(t *testing.T, in []byte) (fast bool) {
	t.Helper()
	var want, got, read chatResponse
	wantErr := sampler.DecodeReply(in, &want)
	err := decodeReply(bytes.NewBuffer(bytes.Clone(in)), &got)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%q: decodeReply error %v, sampler.DecodeReply error %v", in, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decodeReply read\n%#v\nsampler.DecodeReply reads\n%#v", in, got, want)
	}
	if !sampler.ReadAll(bytes.NewBuffer(bytes.Clone(in)), func(d *jsontext.Decoder) bool { return readCompletion(d, &read) }) {
		return false
	}
	if wantErr != nil || !reflect.DeepEqual(read, want) {
		t.Fatalf("%q: the token reader read\n%#v\nsampler.DecodeReply reads\n%#v (error %v)", in, read, want, wantErr)
	}
	return true
}

// The replies of the API's documentation, as the adapter's tests replay
// them, are read by the token reader alone.
func TestDecodeReplyDocumented(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "openai", "replies", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no replies: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !checkDecodeReply(t, b) {
			t.Errorf("%s: left to sampler.DecodeReply", f)
		}
	}
}

func TestDecodeReply(t *testing.T) {
	cases := []struct {
		in   string
		fast bool // read by the token reader alone
	}{
		{`{"model":"m","choices":[{"message":{"content":"a\n\"b\" \u00e9"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`, true},
		{` {"id":"x","object":"chat.completion","choices":[],"usage":null,"system_fingerprint":{"a":[1,{"b":null}]}} `, true},
		{`{"choices":[{"message":{"content":null,"refusal":"no","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`, true},
		{`{"choices":[{"message":{"tool_calls":[{"function":null},{}]},"logprobs":null,"index":0}]}`, true},
		{`{"choices":null,"model":null}`, true},
		{`{}`, true},
		// Left to sampler.DecodeReply, which reads them as encoding/json does.
		{`{"Model":"m"}`, false},
		{`{"finishreason":"x","choices":[{"FINISH_REASON":"stop"}]}`, false},
		{`{"\u006dodel":"m"}`, false},
		{`{"modèl":"m"}`, false},
		{`{"model":"a","model":"b"}`, false},
		{`{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`, false},
		{`{"choices":[{"message":{"content":"\xff"}}]}`, false},
		{`{"choices":[null]}`, false},
		{`{"choices":[1]}`, false},
		{`{"usage":{"prompt_tokens":1.5}}`, false},
		{`{"usage":{"prompt_tokens":1e3}}`, false},
		{`{"usage":{"prompt_tokens":99999999999999999999}}`, false},
		{`{"model":1}`, false},
		{`{"error":{"message":"bad"}}`, false},
		{`{"error":null,"choices":[]}`, false},
		{`{"model":"m"} {}`, false},
		{`{"model":"m"`, false},
		{`[]`, false},
		{`null`, false},
		{``, false},
	}
	for _, c := range cases {
		if fast := checkDecodeReply(t, []byte(c.in)); fast != c.fast {
			t.Errorf("%s: read by the token reader alone: %v, want %v", c.in, fast, c.fast)
		}
	}
}

// FuzzReadCompletion compares decodeReply with sampler.DecodeReply on any
// reply.
func FuzzReadCompletion(f *testing.F) {
	seedReplies(f, "replies", "errors")
	f.Add([]byte(`{"choices":[{"message":{"content":"a","tool_calls":[{"id":"c","function":{"name":"f"}}]}}],"Usage":{}}`))
	f.Fuzz(func(t *testing.T, in []byte) { checkDecodeReply(t, in) })
}
