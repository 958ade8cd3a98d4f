package handlers

import (
	"bytes"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sampled/sampled/internal/sampler"
)

// checkSampleTokens fails unless a sampleBody read token by token holds
// what the reflecting decoder makes of in, and reports whether the token
// reader read it.
func checkSampleTokens(t *testing.T, in []byte) (read bool) {
	t.Helper()
	var want, got sampleBody
	err := jsonv2.Unmarshal(in, &want, strictBodyOptions)
	if !sampler.ReadAll(bytes.NewBuffer(bytes.Clone(in)), func(d *jsontext.Decoder) bool { return got.readTokens(d, true) }) {
		return false
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: the token reader read\n%#v\nthe decoder reads\n%#v (error %v)", in, got, want, err)
	}
	return true
}

func TestSampleBodyTokens(t *testing.T) {
	cases := []struct {
		in   string
		read bool // read by the token reader
	}{
		{`{"prompt":"What is the capital of France?","maxTokens":100}`, true},
		{` {"prompt":"a\n\u00e9\"","systemPrompt":"s","temperature":0.25,"stopSequences":["x",null],"metadata":{"k":[1]},"model":"m","retries":2} `, true},
		{`{"prompt":null,"maxTokens":null,"temperature":null,"stopSequences":null,"messages":null,"tools":null,"retries":null,"model":null}`, true},
		{`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"schema":{"type":"object"},"tools":[{"name":"f","inputSchema":{"type":"object"}}]}`, true},
		{`{"temperature":1e-7,"maxTokens":-0}`, true},
		{`{}`, true},
		// Left to the reflecting decoder.
		{`{"prompt":"a","toolChoice":{"mode":"auto"}}`, false},
		{`{"prompt":"a","tool_choice":{"mode":"auto"}}`, false},
		{`{"prompt":"a","modelPreferences":{"hints":[]}}`, false},
		{`{"prompt":"a","extra":1}`, false},
		{`{"Prompt":"a"}`, false},
		{`{"max_tokens":1}`, false},
		{`{"prompt":"a","prompt":"b"}`, false},
		{`{"metadata":null}`, false},
		{`{"schema":null}`, false},
		{`{"messages":[null]}`, false},
		{`{"maxTokens":1.5}`, false},
		{`{"maxTokens":"1"}`, false},
		{`{"temperature":1e400}`, false},
		{`{"prompt":"\xff"}`, false},
		{`{"prompt":"a"} {}`, false},
		{`{"prompt":"a"`, false},
		{`[]`, false},
		{`null`, false},
	}
	for _, c := range cases {
		if read := checkSampleTokens(t, []byte(c.in)); read != c.read {
			t.Errorf("%s: read by the token reader: %v, want %v", c.in, read, c.read)
		}
	}
}

// FuzzSampleBodyTokens compares the token reader with the reflecting
// decoder on any body.
func FuzzSampleBodyTokens(f *testing.F) {
	seedBodies(f)
	f.Add([]byte(`{"prompt":"a","maxTokens":5,"temperature":0.2,"stopSequences":["x"],"metadata":{"k":1},"retries":1}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}],"schema":true,"systemPrompt":"s"}`))
	f.Fuzz(func(t *testing.T, in []byte) { checkSampleTokens(t, in) })
}
