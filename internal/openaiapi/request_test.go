package openaiapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/offline"
)

func ptr[T any](v T) *T { return &v }

// convert decodes body and converts it, as the facade does.
func convert(body string) (*Call, error) {
	r, err := Decode([]byte(body))
	if err != nil {
		return nil, err
	}
	return r.Call(sampler.DefaultMaxTokens)
}

// TestCallConverts: a request using every member sampled takes becomes
// the domain's params, message by message.
func TestCallConverts(t *testing.T) {
	body := `{
	  "model": "offline/flaky",
	  "messages": [
	    {"role": "system", "content": "Be brief."},
	    {"role": "developer", "content": [{"type": "text", "text": "Answer in English."}, {"type": "text", "text": "No jokes."}]},
	    {"role": "user", "content": [
	      {"type": "text", "text": "What is on this picture, and in this sound?"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}},
	      {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "mp3"}}]},
	    {"role": "assistant", "content": "Let me look.", "refusal": null, "tool_calls": [
	      {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
	      {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": ""}}]},
	    {"role": "tool", "tool_call_id": "c1", "content": "18°C"},
	    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "noon"}]},
	    {"role": "user", "content": "Thanks"}
	  ],
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "strict": true,
	      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
	    {"type": "function", "function": {"name": "get_time"}}],
	  "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
	  "parallel_tool_calls": false,
	  "max_completion_tokens": 300,
	  "temperature": 0.2,
	  "top_p": 1,
	  "n": 1,
	  "stop": "END",
	  "user": "someone",
	  "metadata": {"team": "blue"},
	  "stream": true,
	  "stream_options": {"include_usage": true},
	  "sampled": {"retries": 4, "rawStream": true}
	}`
	c, err := convert(body)
	if err != nil {
		t.Fatal(err)
	}
	want := &sampler.Params{
		Request: sampler.Request{
			SystemPrompt: "Be brief.\n\nAnswer in English.\nNo jokes.",
			Messages: []sampler.Message{
				sampler.UserMessage(sampler.TextBlock("What is on this picture, and in this sound?"),
					sampler.Content{Type: sampler.BlockImage, MIMEType: "image/png", Data: "iVBORw0KGgo="},
					sampler.Content{Type: sampler.BlockAudio, MIMEType: "audio/mpeg", Data: "UklGRg=="}),
				sampler.AssistantMessage(sampler.TextBlock("Let me look."),
					sampler.Content{Type: sampler.BlockToolUse, ID: "c1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
					sampler.Content{Type: sampler.BlockToolUse, ID: "c2", Name: "get_time", Input: json.RawMessage(`{}`)}),
				sampler.UserMessage(
					sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", Content: []sampler.Content{sampler.TextBlock("18°C")}},
					sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c2", Content: []sampler.Content{sampler.TextBlock("noon")}}),
				sampler.UserMessage(sampler.TextBlock("Thanks")),
			},
			MaxTokens:     300,
			Temperature:   ptr(0.2),
			StopSequences: []string{"END"},
			Metadata:      json.RawMessage(`{"team":"blue"}`),
			Tools: []sampler.Tool{
				{Name: "get_weather", Description: "Weather of a city",
					InputSchema: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`)},
				{Name: "get_time", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
			},
			ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "get_weather", DisableParallelToolUse: true},
		},
		ModelSpec: "offline/flaky",
		Retries:   ptr(4),
	}
	if diff := cmp.Diff(want, c.Params, cmp.AllowUnexported(sampler.Message{})); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	if !c.Stream || !c.IncludeUsage || !c.RawStream || !c.Guaranteed() {
		t.Errorf("stream %v, include usage %v, raw stream %v, guaranteed %v; want all set", c.Stream, c.IncludeUsage, c.RawStream, c.Guaranteed())
	}
}

// TestResponseFormats: text is plain sampling, json_object asks for any
// object, json_schema for its schema; max_tokens stands for
// max_completion_tokens, and neither means the default.
func TestResponseFormats(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name      string
		body      string
		schema    string
		maxTokens int
	}{
		{"none", `{"model":"m",` + user + `}`, "", sampler.DefaultMaxTokens},
		{"text", `{"model":"m",` + user + `,"response_format":{"type":"text"},"max_tokens":7}`, "", 7},
		{"json_object", `{"model":"m",` + user + `,"response_format":{"type":"json_object"},"max_tokens":7,"max_completion_tokens":7}`, `{"type":"object"}`, 7},
		{"json_schema", `{"model":"m",` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"array"}}}}`,
			`{"type":"array"}`, sampler.DefaultMaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := convert(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(c.Params.Schema); got != tt.schema || c.Params.MaxTokens != tt.maxTokens {
				t.Errorf("schema %q, maxTokens %d; want %q, %d", got, c.Params.MaxTokens, tt.schema, tt.maxTokens)
			}
			if c.Guaranteed() != (tt.schema != "") {
				t.Errorf("guaranteed %v with schema %q", c.Guaranteed(), tt.schema)
			}
		})
	}
}

// TestRefused: members sampled does not model and values it cannot
// honour are refused, each named by its path; nothing is dropped.
func TestRefused(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	tests := []struct {
		name string
		body string
		path string
		msg  string
	}{
		{"not an object", `[]`, "/", "must be an object"},
		{"unknown member", `{"model":"m","messages":[` + user + `],"frobnicate":1}`, "/frobnicate", `unknown member "frobnicate"`},
		{"openai member sampled lacks", `{"model":"m","messages":[` + user + `],"logprobs":true}`, "/logprobs", "logprobs is not supported"},
		{"unknown member of a message", `{"model":"m","messages":[` + user + `,{"role":"user","content":"x","audio":{}}]}`, "/messages/1/audio", `unknown member "audio"`},
		{"unknown member of a part", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{}}]}]}`,
			"/messages/0/content/0/cache_control", `unknown member "cache_control"`},
		{"unknown member of a tool", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","examples":[]}}]}`,
			"/tools/0/function/examples", `unknown member "examples"`},
		{"unknown member of sampled", `{"model":"m","messages":[` + user + `],"sampled":{"retry":1}}`, "/sampled/retry", `unknown member "retry"`},
		{"member with another case", `{"Model":"m","messages":[` + user + `]}`, "/Model", `unknown member "Model"`},
		{"wrong kind in an array", `{"model":"m","messages":[` + user + `,{"role":5,"content":"x"}]}`, "/messages/1/role", "must be a string"},
		{"wrong kind of content", `{"model":"m","messages":[{"role":"user","content":5}]}`, "/messages/0/content", "content must be a string"},
		{"integer as text", `{"model":"m","messages":[` + user + `],"max_tokens":"5"}`, "/max_tokens", "must be an integer"},
		{"fraction for an integer", `{"model":"m","messages":[` + user + `],"n":1.5}`, "/n", "must be an integer"},
		{"n", `{"model":"m","messages":[` + user + `],"n":2}`, "/n", "n must be 1"},
		{"top_p", `{"model":"m","messages":[` + user + `],"top_p":0.5}`, "/top_p", "top_p is not supported"},
		{"seed", `{"model":"m","messages":[` + user + `],"seed":7}`, "/seed", "seed is not supported"},
		{"role", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "/messages/0/role", "role must be"},
		{"name", `{"model":"m","messages":[{"role":"user","name":"ann","content":"x"}]}`, "/messages/0/name", "name is not supported"},
		{"part type", `{"model":"m","messages":[{"role":"user","content":[{"type":"file"}]}]}`, "/messages/0/content/0/type", `content part type "file" is not supported`},
		{"image by URL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			"/messages/0/content/0/image_url/url", "data URLs"},
		{"image detail", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"high"}}]}]}`,
			"/messages/0/content/0/image_url/detail", "detail \"high\" is not supported"},
		{"image in a system message", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},` + user + `]}`,
			"/messages/0/content/0/type", "image_url parts belong in user messages"},
		{"audio format", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"flac"}}]}]}`,
			"/messages/0/content/0/input_audio/format", "format must be wav or mp3"},
		{"text part without text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "/messages/0/content/0/text", "text is required"},
		{"arguments not an object", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`,
			"/messages/1/tool_calls/0/function/arguments", "arguments must be a JSON object"},
		{"empty assistant", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null}]}`, "/messages/1/content", "needs content or tool_calls"},
		{"tool_calls of a user", `{"model":"m","messages":[{"role":"user","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			"/messages/0/tool_calls", "tool_calls belong in assistant messages"},
		{"max tokens differ", `{"model":"m","messages":[` + user + `],"max_tokens":5,"max_completion_tokens":6}`, "/max_tokens", "differ"},
		{"stream_options without stream", `{"model":"m","messages":[` + user + `],"stream_options":{"include_usage":true}}`, "/stream_options", "needs stream"},
		{"json_schema without schema", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`,
			"/response_format/json_schema/schema", "schema is required"},
		{"format type", `{"model":"m","messages":[` + user + `],"response_format":{"type":"yaml"}}`, "/response_format/type", "type must be"},
		{"format and tools", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"f"}}]}`,
			"/response_format", "cannot be combined"},
		{"tool type", `{"model":"m","messages":[` + user + `],"tools":[{"type":"custom","function":{"name":"f"}}]}`, "/tools/0/type", `type must be "function"`},
		{"tool_choice string", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"any"}`,
			"/tool_choice", "tool_choice must be"},
		{"tool_choice allowed_tools", `{"model":"m","messages":[` + user + `],"tool_choice":{"type":"allowed_tools","allowed_tools":{}}}`,
			"/tool_choice/allowed_tools", `unknown member "allowed_tools"`},
		{"parallel_tool_calls without tools", `{"model":"m","messages":[` + user + `],"parallel_tool_calls":false}`, "/parallel_tool_calls", "needs tools"},
		{"retries of plain sampling", `{"model":"m","messages":[` + user + `],"sampled":{"retries":1}}`, "/sampled/retries", "retries applies to"},
		{"raw stream without stream", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_object"},"sampled":{"rawStream":true}}`,
			"/sampled/rawStream", "needs stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := convert(tt.body)
			inv, ok := err.(*sampler.InvalidError)
			if !ok {
				t.Fatalf("error %v (%T), want a *sampler.InvalidError", err, err)
			}
			if got := inv.Errors[0]; got.Path != tt.path || !strings.Contains(got.Message, tt.msg) {
				t.Errorf("first error %+v; want at %s, saying %q (all: %+v)", got, tt.path, tt.msg, inv.Errors)
			}
		})
	}
}

// TestDomainErrorPaths: the domain names paths in its own request; Err
// puts them in the request that was converted, through system messages
// that are not domain messages, tool messages merged into one, and
// members of other names.
func TestDomainErrorPaths(t *testing.T) {
	body := `{"model":"offline/default","messages":[
	  {"role":"system","content":"s"},
	  {"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:text/plain;base64,AAAA"}}]},
	  {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
	  {"role":"tool","tool_call_id":"c1","content":"ok"},
	  {"role":"tool","tool_call_id":"c9","content":"ok"},
	  {"role":"user","content":"x"}],
	  "tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"bad name!","parameters":{"type":"string"}}}],
	  "max_tokens":0}`
	c, err := convert(body)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ domain, want string }{
		{"/messages/0/content/1/mimeType", "/messages/1/content/1/image_url/url"},
		{"/messages/0/content/1/data", "/messages/1/content/1/image_url/url"},
		{"/messages/0/content/0/text", "/messages/1/content/0/text"},
		{"/messages/1/content/0", "/messages/2/tool_calls/0"},
		{"/messages/1/content/0/input", "/messages/2/tool_calls/0/function/arguments"},
		{"/messages/2/content/1/toolUseId", "/messages/4/tool_call_id"},
		{"/messages/2/content", "/messages/3/content"},
		{"/messages/3/content/0/text", "/messages/5/content"},
		{"/messages/9/role", "/messages/9/role"},
		{"/maxTokens", "/max_tokens"},
		{"/tools/1/name", "/tools/1/function/name"},
		{"/tools/1/inputSchema/type", "/tools/1/function/parameters/type"},
		{"/toolChoice/name", "/tool_choice/function/name"},
		{"/toolChoice/mode", "/tool_choice"},
		{"/stopSequences/0", "/stop/0"},
		{"/retries", "/sampled/retries"},
		{"/model", "/model"},
		{"/", "/"},
	}
	for _, tt := range tests {
		if got := c.path(tt.domain); got != tt.want {
			t.Errorf("path(%s) = %s, want %s", tt.domain, got, tt.want)
		}
	}

	// The domain's own checks of this request, through Err.
	svc, err := sampler.New(sampler.Options{Providers: []sampler.Provider{offline.New(nil)},
		Catalog: sampler.NewCatalog([]sampler.Model{{Provider: "offline", Name: "default"}}, "offline/default")})
	if err != nil {
		t.Fatal(err)
	}
	inv, ok := c.Err(svc.Check(c.Params)).(*sampler.InvalidError)
	if !ok {
		t.Fatalf("Check: want a *sampler.InvalidError")
	}
	var got []string
	for _, e := range inv.Errors {
		got = append(got, e.Path)
	}
	want := []string{"/max_tokens", "/messages/1/content/1/image_url/url", "/messages/4/tool_call_id", "/tools/1/function/name", "/tools/1/function/parameters/type"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths of the domain's errors (-want +got):\n%s\n%+v", diff, inv.Errors)
	}
	if !strings.HasPrefix(inv.Detail, "/max_tokens: ") {
		t.Errorf("detail %q, want it to name /max_tokens first", inv.Detail)
	}
}

// TestExhaustedPaths: the errors of a guarantee that ran out name the
// members of the answer's message.
func TestExhaustedPaths(t *testing.T) {
	var c Call
	err := c.Err(&sampler.ExhaustedError{Method: sampler.MethodSample, Attempts: 3, Errors: []sampler.FieldError{
		{Path: "/toolCalls/0/arguments/city", Message: "m1"}, {Path: "/toolCalls/1/name", Message: "m2"},
		{Path: "/toolCalls", Message: "m3"}, {Path: "/age", Message: "m4"}}})
	ex, ok := err.(*sampler.ExhaustedError)
	if !ok {
		t.Fatalf("Err returned %T", err)
	}
	want := []sampler.FieldError{{Path: "/tool_calls/0/function/arguments/city", Message: "m1"}, {Path: "/tool_calls/1/function/name", Message: "m2"},
		{Path: "/tool_calls", Message: "m3"}, {Path: "/age", Message: "m4"}}
	if diff := cmp.Diff(want, ex.Errors); diff != "" || ex.Attempts != 3 {
		t.Errorf("attempts %d, errors (-want +got):\n%s", ex.Attempts, diff)
	}
}
