package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/offline"
	"github.com/sampled/sampled/internal/testing/openaispec"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// sdk is OpenAI's Go SDK pointed at the stack's /openai/v1, without its
// own retries.
func sdk(s *stack, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(s.url + "/openai/v1/"), option.WithAPIKey("none"),
		option.WithHTTPClient(s.srv.Client()), option.WithMaxRetries(0)}, opts...)...)
}

// weatherTool is a function tool whose calls the offline model makes when
// the prompt mentions the weather, with a city taken from it.
var weatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Get the current weather for a city"),
	Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []string{"city"}, "additionalProperties": false},
})

var timeTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:       "get_time",
	Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}},
})

// personFormat asks for a person as JSON.
var personFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
	JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Strict: openai.Bool(true),
		Schema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"},
			"age": map[string]any{"type": "integer", "minimum": 0}}, "required": []string{"name", "age"}, "additionalProperties": false}}}}

// apiError is err as the SDK's API error, failing t if it is not one.
func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want an *openai.Error", err, err)
	}
	return e
}

// wantAPIError checks the status, type, param and code of an SDK error.
func wantAPIError(t *testing.T, err error, status int, typ, param, code string) *openai.Error {
	t.Helper()
	e := apiError(t, err)
	if e.StatusCode != status || e.Type != typ || e.Param != param || e.Code != code {
		t.Errorf("error %d type %q param %q code %q; want %d %q %q %q\n%s", e.StatusCode, e.Type, e.Param, e.Code, status, typ, param, code, e.RawJSON())
	}
	return e
}

// TestOpenAIChat: the SDK's plain chat, whole and streamed, with the
// stream accumulated into the same answer.
func TestOpenAIChat(t *testing.T) {
	s := startStack(t, 0)
	c := sdk(s)
	params := openai.ChatCompletionNewParams{
		Model: "offline/default",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."),
			openai.UserMessage("Name three rivers in France")},
		MaxCompletionTokens: openai.Int(200),
	}
	var resp *http.Response
	whole, err := c.Chat.Completions.New(t.Context(), params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(attemptsHeader) != "1" {
		t.Errorf("%s = %q, want 1", attemptsHeader, resp.Header.Get(attemptsHeader))
	}
	if len(whole.Choices) != 1 || !strings.Contains(whole.Choices[0].Message.Content, "rivers") || whole.Choices[0].FinishReason != "stop" ||
		whole.Model != "offline/default" || !strings.HasPrefix(whole.ID, "chatcmpl-") {
		t.Errorf("completion %s", whole.RawJSON())
	}
	if u := whole.Usage; u.PromptTokens == 0 || u.CompletionTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %+v", u)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused chunk %d: %s", chunks, stream.Current().RawJSON())
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != whole.Choices[0].Message.Content || acc.Choices[0].FinishReason != "stop" ||
		acc.Model != "offline/default" || acc.Usage.TotalTokens != whole.Usage.TotalTokens {
		t.Errorf("accumulated %d chunks into content %q, finish %q, model %q, usage %d; want the whole answer %s", chunks,
			acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, acc.Model, acc.Usage.TotalTokens, whole.RawJSON())
	}
}

// TestOpenAITools: with tools, every call names a declared tool with
// arguments valid for its parameters, and keeps tool_choice; the call
// and its result go back as the SDK sends them, and the model answers.
func TestOpenAITools(t *testing.T) {
	s := startStack(t, 0)
	c := sdk(s)
	tests := []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		want   string
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, "get_weather"},
		{"named", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"}), "get_time"},
	}
	for _, tt := range tests {
		for _, streamed := range []bool{false, true} {
			name := tt.name
			if streamed {
				name += " streamed"
			}
			t.Run(name, func(t *testing.T) {
				params := openai.ChatCompletionNewParams{
					Model:             "offline/default",
					Messages:          []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
					Tools:             []openai.ChatCompletionToolUnionParam{weatherTool, timeTool},
					ToolChoice:        tt.choice,
					ParallelToolCalls: openai.Bool(false),
				}
				var msg openai.ChatCompletionMessage
				var finish string
				if streamed {
					stream := c.Chat.Completions.NewStreaming(t.Context(), params)
					var acc openai.ChatCompletionAccumulator
					for stream.Next() {
						if !acc.AddChunk(stream.Current()) {
							t.Fatalf("the accumulator refused %s", stream.Current().RawJSON())
						}
					}
					if err := stream.Err(); err != nil {
						t.Fatal(err)
					}
					msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
				} else {
					res, err := c.Chat.Completions.New(t.Context(), params)
					if err != nil {
						t.Fatal(err)
					}
					msg, finish = res.Choices[0].Message, res.Choices[0].FinishReason
				}
				if len(msg.ToolCalls) != 1 || finish != "tool_calls" {
					t.Fatalf("message %s, finish %q; want one tool call", msg.RawJSON(), finish)
				}
				call := msg.ToolCalls[0]
				var args map[string]any
				if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
					t.Fatalf("arguments %q: %v", call.Function.Arguments, err)
				}
				if call.Function.Name != tt.want || call.ID == "" || call.Type != "function" {
					t.Errorf("call %s, want one of %s", call.RawJSON(), tt.want)
				}
				if tt.want == "get_weather" && args["city"] != "Paris" {
					t.Errorf("arguments %v, want the city Paris", args)
				}

				// The conversation goes on with the call's result.
				params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("18°C, cloudy", call.ID))
				params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
				res, err := c.Chat.Completions.New(t.Context(), params)
				if err != nil {
					t.Fatal(err)
				}
				if m := res.Choices[0].Message; len(m.ToolCalls) != 0 || !strings.Contains(m.Content, "18°C") || res.Choices[0].FinishReason != "stop" {
					t.Errorf("answer to the tool result: %s", res.RawJSON())
				}
			})
		}
	}
}

// TestOpenAISchemaRetry: a json_schema answer of offline/flaky fails its
// first attempt and is corrected; the answer validates, says 2 attempts
// in Sampled-Attempts, and its usage counts both. Streamed, only the
// answer that validated is sent.
func TestOpenAISchemaRetry(t *testing.T) {
	s := startStack(t, 0)
	c := sdk(s)
	params := openai.ChatCompletionNewParams{
		Model:          "offline/default",
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("A person")},
		ResponseFormat: personFormat,
	}
	once, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	params.Model = "offline/flaky"
	var resp *http.Response
	res, err := c.Chat.Completions.New(t.Context(), params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get(attemptsHeader); got != "2" {
		t.Errorf("%s = %q, want 2", attemptsHeader, got)
	}
	checkPerson(t, res.Choices[0].Message.Content)
	// The second attempt reads the first, its answer and the correction:
	// more than twice the prompt of one attempt.
	if u := res.Usage; u.PromptTokens <= 2*once.Usage.PromptTokens || u.CompletionTokens <= once.Usage.CompletionTokens ||
		u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage of 2 attempts %s; one attempt's is %s", u.RawJSON(), once.Usage.RawJSON())
	}

	stream := c.Chat.Completions.NewStreaming(t.Context(), params, option.WithResponseInto(&resp))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get(attemptsHeader); got != "2" {
		t.Errorf("streamed: %s = %q, want 2", attemptsHeader, got)
	}
	checkPerson(t, acc.Choices[0].Message.Content)
}

// checkPerson checks that content is a person as personFormat asks.
func checkPerson(t *testing.T, content string) {
	t.Helper()
	var p struct {
		Name *string `json:"name"`
		Age  *int    `json:"age"`
	}
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.Name == nil || p.Age == nil || *p.Age < 0 {
		t.Errorf("content %q is not a person: %v", content, err)
	}
}

// TestOpenAIRawStream: with sampled.rawStream every attempt streams live,
// the second after an ": attempt 2" comment; what validated is the last.
func TestOpenAIRawStream(t *testing.T) {
	s := startStack(t, 0)
	body := `{"model":"offline/flaky","stream":true,"messages":[{"role":"user","content":"A person"}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}},` +
		`"sampled":{"rawStream":true}}`
	resp, raw := post(t, s, "/openai/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	if !bytes.Contains(raw, []byte("\n: attempt 2\n")) {
		t.Errorf("no attempt comment in\n%s", raw)
	}
	first, second, _ := bytes.Cut(raw, []byte(": attempt 2\n"))
	a1, a2 := streamedContent(t, first), streamedContent(t, second)
	if json.Valid([]byte(a1)) || !json.Valid([]byte(a2)) {
		t.Errorf("attempt 1 %q (want broken JSON), attempt 2 %q (want JSON)", a1, a2)
	}

	// The SDK reads the concatenation and skips the comment.
	c := sdk(s)
	stream := c.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "offline/flaky", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("A person")}, ResponseFormat: personFormat,
	}, option.WithJSONSet("sampled", map[string]any{"rawStream": true}))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content := acc.Choices[0].Message.Content; json.Valid([]byte(content)) || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("raw stream accumulated %q, finish %q; want both attempts' text", content, acc.Choices[0].FinishReason)
	}
}

// TestOpenAIExhausted: a guarantee whose attempts run out is a 422 with
// OpenAI's shape, the attempts and the errors by path; streamed live, the
// error ends the stream and the SDK raises it.
func TestOpenAIExhausted(t *testing.T) {
	s := startStack(t, 0)
	c := sdk(s)
	params := openai.ChatCompletionNewParams{
		Model:          "offline/broken",
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("A person")},
		ResponseFormat: personFormat,
	}
	var resp *http.Response
	_, err := c.Chat.Completions.New(t.Context(), params, option.WithJSONSet("sampled", map[string]any{"retries": 0}), option.WithResponseInto(&resp))
	e := wantAPIError(t, err, 422, "invalid_request_error", "", "validation_failed")
	if got := resp.Header.Get(attemptsHeader); got != "1" {
		t.Errorf("%s = %q, want 1", attemptsHeader, got)
	}
	var extra struct {
		Error struct {
			Attempts int                  `json:"attempts"`
			Errors   []sampler.FieldError `json:"errors"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(e.RawJSON()), &extra.Error); err != nil {
		t.Fatal(err)
	}
	if extra.Error.Attempts != 1 || len(extra.Error.Errors) == 0 || extra.Error.Errors[0].Path != "/" {
		t.Errorf("error %s; want 1 attempt and the errors", e.RawJSON())
	}
	if _, ok := e.JSON.ExtraFields["attempts"]; !ok {
		t.Errorf("the SDK kept no attempts member: %v", e.JSON.ExtraFields)
	}

	// Tools: the calls are checked, here with one retry.
	_, err = c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:      "offline/broken",
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		Tools:      []openai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
	}, option.WithJSONSet("sampled", map[string]any{"retries": 1}))
	e = wantAPIError(t, err, 422, "invalid_request_error", "", "validation_failed")
	if !strings.Contains(e.RawJSON(), `"attempts":2`) || !strings.Contains(e.RawJSON(), `"path":"/tool_calls"`) {
		t.Errorf("error %s; want 2 attempts and an error at /tool_calls", e.RawJSON())
	}

	// Streamed raw, the first attempt's tokens went out: the error ends
	// the stream.
	stream := c.Chat.Completions.NewStreaming(t.Context(), params, option.WithJSONSet("sampled", map[string]any{"retries": 1, "rawStream": true}))
	n := 0
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "validation_failed") || n == 0 {
		t.Errorf("after %d chunks, stream error %v; want the 422 in the stream", n, err)
	}
	// Not raw, nothing went out: the error is the answer.
	stream = c.Chat.Completions.NewStreaming(t.Context(), params, option.WithJSONSet("sampled", map[string]any{"retries": 0}))
	for stream.Next() {
		t.Errorf("chunk %s before the error", stream.Current().RawJSON())
	}
	wantAPIError(t, stream.Err(), 422, "invalid_request_error", "", "validation_failed")
}

// TestOpenAIRequestErrors: what sampled refuses reaches the SDK as an
// *openai.Error with the status, type, param and code.
func TestOpenAIRequestErrors(t *testing.T) {
	s := startStack(t, 0)
	c := sdk(s)
	base := func() openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "offline/default", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	}
	seeded := base()
	seeded.Seed = openai.Int(7)
	unknown := base()
	unknown.Model = "nowhere/model"
	many := base()
	many.N = openai.Int(2)
	tests := []struct {
		name   string
		params openai.ChatCompletionNewParams
		opts   []option.RequestOption
		param  string
		code   string
		msg    string
	}{
		{"unknown member", base(), []option.RequestOption{option.WithJSONSet("frobnicate", true)}, "frobnicate", "invalid_request", `unknown member "frobnicate"`},
		{"unknown member of sampled", base(), []option.RequestOption{option.WithJSONSet("sampled", map[string]any{"retry": 1})}, "sampled.retry", "invalid_request", "unknown member"},
		{"seed", seeded, nil, "seed", "invalid_request", "seed is not supported"},
		{"n", many, nil, "n", "invalid_request", "n must be 1"},
		{"unknown model", unknown, nil, "model", "model_not_found", "unknown model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Chat.Completions.New(t.Context(), tt.params, tt.opts...)
			e := wantAPIError(t, err, 400, "invalid_request_error", tt.param, tt.code)
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q, want it to say %q", e.Message, tt.msg)
			}
		})
	}

	// A route of another path: 404 in OpenAI's shape.
	_, err := c.Models.Get(t.Context(), "gpt-4o")
	wantAPIError(t, err, 404, "invalid_request_error", "", "not_found")
}

// TestOpenAIKeys: with keys configured, a missing or wrong key is a 401
// the SDK reads, a good one is served, and the rate limit's 429 (a burst
// of 2 at 20 a minute) keeps its Retry-After.
func TestOpenAIKeys(t *testing.T) {
	a := startAccessStack(t, access.Options{RequestsPerMinute: 20}, false)
	params := openai.ChatCompletionNewParams{Model: "offline/default", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	c := sdk(a.stack, option.WithAPIKey("wrong-key"))
	_, err := c.Chat.Completions.New(t.Context(), params)
	wantAPIError(t, err, 401, "authentication_error", "", "invalid_api_key")

	c = sdk(a.stack, option.WithAPIKey(keyAlice))
	if _, err := c.Chat.Completions.New(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Models.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	_, err = c.Chat.Completions.New(t.Context(), params, option.WithResponseInto(&resp))
	wantAPIError(t, err, 429, "rate_limit_error", "", "rate_limit_exceeded")
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
}

// TestOpenAIModels: the SDK lists the configured models.
func TestOpenAIModels(t *testing.T) {
	s := startStack(t, 0)
	c := sdk(s)
	page, err := c.Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.OwnedBy != "offline" || m.Object != "model" {
			t.Errorf("model %s", m.RawJSON())
		}
	}
	for _, want := range []string{"offline/default", "offline/flaky", "offline/broken", "offline/slow"} {
		if !slices.Contains(ids, want) {
			t.Errorf("models %v, want %s among them", ids, want)
		}
	}
}

// post sends body to path and returns the response and its body.
func post(t *testing.T, s *stack, path, body string) (*http.Response, []byte) {
	t.Helper()
	return send(t, s, http.MethodPost, path, "application/json", body)
}

func send(t *testing.T, s *stack, method, path, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// streamedChunks reads an event stream of chunks, checking each against
// OpenAI's schema and the stream's end, [DONE].
func streamedChunks(t *testing.T, raw []byte) []map[string]any {
	t.Helper()
	var chunks []map[string]any
	done := false
	for ev, err := range sse.Read(bytes.NewReader(raw), nil) {
		if err != nil {
			t.Fatalf("reading the stream: %v\n%s", err, raw)
		}
		if done {
			t.Errorf("event after [DONE]: %s", ev.Data)
		}
		if ev.Data == "[DONE]" {
			done = true
			continue
		}
		openaispec.Check(t, "CreateChatCompletionStreamResponse", []byte(ev.Data))
		var ch map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, ch)
	}
	if !done {
		t.Errorf("the stream does not end with [DONE]:\n%s", raw)
	}
	return chunks
}

// streamedContent joins the content of the chunks of part of a stream.
func streamedContent(t *testing.T, raw []byte) string {
	t.Helper()
	var b strings.Builder
	for ev, err := range sse.Read(bytes.NewReader(raw), nil) {
		if err != nil || ev.Data == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", ev.Data, err)
		}
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String()
}

// TestOpenAIBodiesMatchSpec: whole answers, streamed chunks and errors,
// as they go over the wire, match OpenAI's schemas; errors are OpenAI's
// on every path under /openai/, from the routes and the middleware alike.
func TestOpenAIBodiesMatchSpec(t *testing.T) {
	s := startStack(t, 0)
	small := startStackWith(t, stackOptions{maxBody: 512})
	const (
		user    = `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is the weather in Paris?"}]`
		weather = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
		person  = `"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`
	)
	answers := []struct {
		name string
		body string
	}{
		{"text", `{"model":"offline/default",` + user + `}`},
		{"tools", `{"model":"offline/flaky",` + user + `,` + weather + `,"tool_choice":"required"}`},
		{"schema", `{"model":"offline/flaky",` + user + `,` + person + `}`},
		{"json object", `{"model":"offline/default",` + user + `,"response_format":{"type":"json_object"}}`},
		{"length", `{"model":"offline/default",` + user + `,"max_completion_tokens":2}`},
	}
	for _, tt := range answers {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := post(t, s, "/openai/v1/chat/completions", tt.body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			}
			openaispec.Check(t, "CreateChatCompletionResponse", raw)

			streamed := strings.Replace(tt.body, "{", `{"stream":true,"stream_options":{"include_usage":true},`, 1)
			resp, raw = post(t, s, "/openai/v1/chat/completions", streamed)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("streamed: status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			}
			chunks := streamedChunks(t, raw)
			if len(chunks) < 3 {
				t.Fatalf("%d chunks: %s", len(chunks), raw)
			}
			last, usage := chunks[len(chunks)-2], chunks[len(chunks)-1]
			if fr := last["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr == nil {
				t.Errorf("the last chunk with a choice has no finish_reason: %v", last)
			}
			if len(usage["choices"].([]any)) != 0 || usage["usage"] == nil {
				t.Errorf("the usage chunk is %v", usage)
			}
		})
	}

	models, raw := send(t, s, http.MethodGet, "/openai/v1/models", "", "")
	if models.StatusCode != 200 {
		t.Fatalf("models: %d %s", models.StatusCode, raw)
	}
	openaispec.Check(t, "ListModelsResponse", raw)

	errs := []struct {
		name        string
		srv         *stack
		method      string
		path        string
		contentType string
		body        string
		status      int
		param       string
	}{
		{"invalid", s, "POST", "/openai/v1/chat/completions", "application/json", `{"model":"offline/default","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/a.png"}}]}]}`,
			400, "messages[0].content[0].image_url.url"},
		{"domain's check", s, "POST", "/openai/v1/chat/completions", "application/json", `{"model":"offline/default","messages":[{"role":"system","content":"s"},{"role":"user","content":"x"}],"temperature":3}`,
			400, "temperature"},
		{"not JSON", s, "POST", "/openai/v1/chat/completions", "application/json", `{"model":`, 400, ""},
		{"not found", s, "GET", "/openai/v1/assistants", "", "", 404, ""},
		{"method", s, "GET", "/openai/v1/chat/completions", "", "", 405, ""},
		{"media type", s, "POST", "/openai/v1/chat/completions", "text/plain", `hi`, 415, ""},
		{"too large", small, "POST", "/openai/v1/chat/completions", "application/json", `{"model":"offline/default","messages":[{"role":"user","content":"` + strings.Repeat("x", 600) + `"}]}`, 413, ""},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := send(t, tt.srv, tt.method, tt.path, tt.contentType, tt.body)
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, %s; want %d, application/json: %s", resp.StatusCode, resp.Header.Get("Content-Type"), tt.status, raw)
			}
			openaispec.Check(t, "ErrorResponse", raw)
			var e struct {
				Error struct {
					Param *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			if got := e.Error.Param; (got == nil) != (tt.param == "") || got != nil && *got != tt.param {
				t.Errorf("param %v, want %q: %s", got, tt.param, raw)
			}
		})
	}

	// sampled's own routes keep their problems.
	resp, raw := send(t, s, http.MethodGet, "/openai", "", "")
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("GET /openai: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
}

// TestOpenAIDisconnect: a client that goes away cancels the work: the
// request of offline/slow ends as cancelled well before the model would
// have answered.
func TestOpenAIDisconnect(t *testing.T) {
	s := startStack(t, 0)
	for _, streamed := range []bool{false, true} {
		cancelled := func() float64 {
			return testutil.ToFloat64(s.metrics.Samples.WithLabelValues("openai_chat", sampler.ModePlain, "other", "other", sampler.OutcomeCancelled))
		}
		before := cancelled()
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		errc := make(chan error, 1)
		go func() {
			c := sdk(s)
			params := openai.ChatCompletionNewParams{Model: "offline/slow", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
			if streamed {
				stream := c.Chat.Completions.NewStreaming(ctx, params)
				for stream.Next() {
				}
				errc <- stream.Err()
				return
			}
			_, err := c.Chat.Completions.New(ctx, params)
			errc <- err
		}()
		time.Sleep(100 * time.Millisecond)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("streamed %v: client error %v, want context.Canceled", streamed, err)
		}
		testwait.Poll(t, time.Millisecond, 10*time.Second, "the request counted as cancelled", func() bool { return cancelled() == before+1 })
		if d := time.Since(start); d >= offline.SlowDelay {
			t.Errorf("streamed %v: the request ended after %s; the model answers after %s", streamed, d, offline.SlowDelay)
		}
	}
}

// TestOpenAIRoutesInOpenAIsSpec: each route of the dialect is an
// operation of OpenAI's API, under the prefix.
func TestOpenAIRoutesInOpenAIsSpec(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../../reference/openai/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range newServer(Config{}).openaiTable() {
		path, ok := strings.CutPrefix(rt.path, "/openai/v1")
		item := doc.Paths.Find(path)
		if !ok || item == nil || item.GetOperation(rt.method) == nil {
			t.Errorf("%s %s is not an operation of OpenAI's API", rt.method, rt.path)
		}
	}
}
