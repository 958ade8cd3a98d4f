package openaiapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/openaispec"
)

// marshal encodes v, failing t if it cannot.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	textResult = &sampler.Result{ModelID: "offline/default", Model: "default", Role: sampler.RoleAssistant,
		Content: []sampler.Content{sampler.TextBlock("Hello")}, Text: "Hello", StopReason: sampler.StopEndTurn,
		Usage: sampler.Usage{InputTokens: 3, OutputTokens: 1}, Attempts: 1}
	callResult = &sampler.Result{ModelID: "offline/flaky", Role: sampler.RoleAssistant,
		Content:    []sampler.Content{{Type: sampler.BlockToolUse, ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{ "city": "Paris" }`)}},
		StopReason: sampler.StopToolUse, Usage: sampler.Usage{InputTokens: 20, OutputTokens: 6}, Attempts: 2,
		ToolCalls: []sampler.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{ "city": "Paris" }`)}}}
)

// TestCompletion: a result is a chat completion with the model that
// answered, text or tool calls (content null then), the finish reason
// and the usage, as OpenAI's schema has it.
func TestCompletion(t *testing.T) {
	m := Meta{ID: "chatcmpl-1", Created: 1700000000}
	tests := []struct {
		name string
		res  *sampler.Result
		want string
	}{
		{"text", textResult, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"offline/default",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"finish_reason":"stop","logprobs":null}],` +
			`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`},
		{"tool call", callResult, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"offline/flaky",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls","logprobs":null}],` +
			`"usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := marshal(t, Completion(m, tt.res))
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("completion (-want +got):\n%s", diff)
			}
			openaispec.Check(t, "CreateChatCompletionResponse", got)
		})
	}
}

// TestFinishReason maps MCP's stop reasons.
func TestFinishReason(t *testing.T) {
	tests := []struct {
		stop  string
		calls bool
		want  string
	}{
		{sampler.StopEndTurn, false, chat.FinishStop},
		{sampler.StopStopSequence, false, chat.FinishStop},
		{sampler.StopMaxTokens, false, chat.FinishLength},
		{sampler.StopMaxTokens, true, chat.FinishLength},
		{sampler.StopToolUse, true, chat.FinishToolCalls},
		{sampler.StopEndTurn, true, chat.FinishToolCalls},
		{sampler.StopRefusal, false, chat.FinishContentFilter},
		{"pause_turn", false, chat.FinishStop},
	}
	for _, tt := range tests {
		res := &sampler.Result{StopReason: tt.stop, Content: []sampler.Content{sampler.TextBlock("x")}}
		if tt.calls {
			res.Content = append(res.Content, sampler.Content{Type: sampler.BlockToolUse, ID: "c", Name: "f"})
		}
		if got := FinishReason(res); got != tt.want {
			t.Errorf("FinishReason(%s, calls %v) = %s, want %s", tt.stop, tt.calls, got, tt.want)
		}
	}
}

// TestChunks: deltas become chunks, the first with the role, a tool
// call's first fragment with its id and name and later ones with pieces
// of its arguments; a later attempt starts its calls over; the end has
// the finish reason and, when asked, a chunk of usage without choices.
// Every chunk matches OpenAI's schema.
func TestChunks(t *testing.T) {
	c := &Chunks{Meta: Meta{ID: "chatcmpl-9", Created: 5}, Model: "offline/flaky"}
	var got []chat.Chunk
	for _, d := range []sampler.Delta{
		{Attempt: 1, Text: "not json"},
		{Attempt: 2, ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "call_1", Name: "get_weather", Arguments: `{"city":`}},
		{Attempt: 2, ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "call_1", Name: "get_weather", Arguments: `"Paris"}`}},
		{Attempt: 3, ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "call_2", Name: "get_weather"}},
	} {
		got = append(got, c.Delta(d)...)
	}
	got = append(got, c.Finish(callResult, true)...)
	var lines []string
	for _, ch := range got {
		b := marshal(t, ch)
		openaispec.Check(t, "CreateChatCompletionStreamResponse", b)
		lines = append(lines, string(b))
	}
	head := `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":5,"model":"offline/flaky",`
	want := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"not json"},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather"}}]},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"get_weather"}}]},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		head + `"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26}}`,
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
}

// TestChunksOfResult: a whole answer, sent once it validated, is the
// chunks of its text or calls and its end; one without text or calls
// still carries the role.
func TestChunksOfResult(t *testing.T) {
	tests := []struct {
		name string
		res  *sampler.Result
		want []string
	}{
		{"text", textResult, []string{`{"role":"assistant","content":"Hello"}`, `{}`}},
		{"tool call", callResult, []string{
			`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather"}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}`, `{}`}},
		{"empty", &sampler.Result{ModelID: "offline/default", StopReason: sampler.StopMaxTokens, Attempts: 1},
			[]string{`{"role":"assistant","content":""}`, `{}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Chunks{Meta: NewMeta(time.Unix(7, 0)), Model: "offline/default"}
			chunks := append(c.Result(tt.res), c.Finish(tt.res, false)...)
			var got []string
			for _, ch := range chunks {
				openaispec.Check(t, "CreateChatCompletionStreamResponse", marshal(t, ch))
				if ch.ID != c.ID || !strings.HasPrefix(ch.ID, "chatcmpl-") || ch.Created != 7 || ch.Model != tt.res.ModelID {
					t.Errorf("chunk id %q, created %d, model %q; want %q, 7, %q", ch.ID, ch.Created, ch.Model, c.ID, tt.res.ModelID)
				}
				got = append(got, string(marshal(t, ch.Choices[0].Delta)))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if fr := chunks[len(chunks)-1].Choices[0].FinishReason; fr == nil || *fr != FinishReason(tt.res) {
				t.Errorf("last chunk's finish_reason %v, want %s", fr, FinishReason(tt.res))
			}
		})
	}
}

// TestError: sampled's problems in OpenAI's shape: the type by status,
// the code from the problem's slug, param the first error's member in
// dotted form, and, for exhausted attempts, the attempts and the errors.
func TestError(t *testing.T) {
	errs := []sampler.FieldError{{Path: "/messages/2/content/0/image_url/url", Message: "bad"}, {Path: "/n", Message: "n must be 1"}}
	tests := []struct {
		name     string
		status   int
		slug     string
		errs     []sampler.FieldError
		ext      map[string]any
		typ      string
		code     string
		param    string
		attempts int
	}{
		{"invalid", 400, "invalid-request", errs, nil, "invalid_request_error", "invalid_request", "messages[2].content[0].image_url.url", 0},
		{"unknown model", 400, "invalid-request", []sampler.FieldError{{Path: "/model", Message: "unknown model"}}, nil, "invalid_request_error", "model_not_found", "model", 0},
		{"no key", 401, "unauthorized", nil, nil, "authentication_error", "invalid_api_key", "", 0},
		{"forbidden", 403, "forbidden", nil, nil, "permission_error", "forbidden", "", 0},
		{"not found", 404, "not-found", nil, nil, "invalid_request_error", "not_found", "", 0},
		{"method", 405, "method-not-allowed", nil, nil, "invalid_request_error", "method_not_allowed", "", 0},
		{"slow body", 408, "request-timeout", nil, nil, "invalid_request_error", "request_timeout", "", 0},
		{"large body", 413, "body-too-large", nil, nil, "invalid_request_error", "body_too_large", "", 0},
		{"media type", 415, "unsupported-media-type", nil, nil, "invalid_request_error", "unsupported_media_type", "", 0},
		{"exhausted", 422, "sample-validation-error", []sampler.FieldError{{Path: "/tool_calls/0/function/arguments/city", Message: "missing"}},
			map[string]any{"attempts": 3, "method": "sample"}, "invalid_request_error", "validation_failed", "", 3},
		{"rate", 429, "rate-limited", nil, map[string]any{"limit": "requests"}, "rate_limit_error", "rate_limit_exceeded", "", 0},
		{"internal", 500, "internal", nil, nil, "server_error", "internal", "", 0},
		{"upstream", 502, "upstream-error", nil, nil, "api_error", "upstream_error", "", 0},
		{"upstream down", 503, "upstream-unavailable", nil, nil, "api_error", "upstream_unavailable", "", 0},
		{"upstream slow", 504, "upstream-timeout", nil, nil, "api_error", "upstream_timeout", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Error(tt.status, tt.slug, "what went wrong", tt.errs, tt.ext)
			b := marshal(t, e)
			openaispec.Check(t, "ErrorResponse", b)
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Type != tt.typ || e.Error.Code == nil || *e.Error.Code != tt.code || param != tt.param || e.Error.Attempts != tt.attempts ||
				e.Error.Message != "what went wrong" {
				t.Errorf("error %s; want type %s, code %s, param %q, attempts %d", b, tt.typ, tt.code, tt.param, tt.attempts)
			}
			if diff := cmp.Diff(tt.errs, e.Error.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	// The members a 422 adds, as they are written.
	b := marshal(t, Error(422, "sample-validation-error", "no valid answer", []sampler.FieldError{{Path: "/name", Message: "required"}}, map[string]any{"attempts": 2}))
	want := `{"error":{"message":"no valid answer","type":"invalid_request_error","param":null,"code":"validation_failed","attempts":2,"errors":[{"path":"/name","message":"required"}]}}`
	if string(b) != want {
		t.Errorf("422 error\n got %s\nwant %s", b, want)
	}
}

// TestParam writes JSON Pointers in OpenAI's dotted form.
func TestParam(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/messages/2/content", "messages[2].content"},
		{"/tools/0/function/parameters/properties/a~1b", "tools[0].function.parameters.properties.a/b"},
		{"/metadata/7", "metadata[7]"},
		{"/model", "model"},
	}
	for _, tt := range tests {
		if got := Param(tt.path); got == nil || *got != tt.want {
			t.Errorf("Param(%s) = %v, want %s", tt.path, got, tt.want)
		}
	}
	for _, root := range []string{"", "/"} {
		if got := Param(root); got != nil {
			t.Errorf("Param(%q) = %s, want nil", root, *got)
		}
	}
}

// TestModels: the catalog as OpenAI's model list.
func TestModels(t *testing.T) {
	list := Models([]sampler.Model{{Provider: "offline", Name: "default"}, {Provider: "openai", Name: "gpt-4o-mini"}})
	b := marshal(t, list)
	openaispec.Check(t, "ListModelsResponse", b)
	want := `{"object":"list","data":[{"id":"offline/default","object":"model","created":0,"owned_by":"offline"},` +
		`{"id":"openai/gpt-4o-mini","object":"model","created":0,"owned_by":"openai"}]}`
	if string(b) != want {
		t.Errorf("models\n got %s\nwant %s", b, want)
	}
	openaispec.Check(t, "ListModelsResponse", marshal(t, Models(nil)))
}
