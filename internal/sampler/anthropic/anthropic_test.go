package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

func ptr[T any](v T) *T { return &v }

var (
	user      = sampler.UserMessage
	assistant = sampler.AssistantMessage
	text      = sampler.TextBlock
)

func toolUse(id, name, input string) sampler.Content {
	return sampler.Content{Type: sampler.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(input)}
}

// A 1×1 PNG.
const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

const contactSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "email": {"type": "string", "format": "email"},
    "plan_interest": {"type": "string"},
    "demo_requested": {"type": "boolean"}
  },
  "required": ["name", "email", "plan_interest", "demo_requested"],
  "additionalProperties": false
}`

func weatherTool() sampler.Tool {
	return sampler.Tool{
		Name:        "get_weather",
		Description: "Get the current weather in a given location",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`),
	}
}

func timeTool() sampler.Tool {
	return sampler.Tool{
		Name:        "get_time",
		Description: "Get the current time in a given time zone",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}`),
	}
}

func TestSample(t *testing.T) {
	extract := user(text("Extract the contact: John Smith (john@example.com) wants an Enterprise demo."))
	tests := []struct {
		name  string
		req   sampler.Request
		reply string
		want  *sampler.Response
	}{
		{
			name: "text",
			req: sampler.Request{
				Model:         "claude-sonnet-4-5",
				SystemPrompt:  "You are a concise assistant.",
				MaxTokens:     1024,
				Temperature:   ptr(0.2),
				StopSequences: []string{"###"},
				Metadata:      json.RawMessage(`{"user_id":"user-42","trace":"abc"}`),
				Messages: []sampler.Message{user(
					text("What is in this image?"),
					sampler.Content{Type: sampler.BlockImage, Data: pixel, MIMEType: "image/png"},
				)},
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text("Hello! The image shows a red square.")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 2095, OutputTokens: 503},
			},
		},
		{
			name: "stop_sequence",
			req: sampler.Request{
				Model:         "claude-sonnet-4-5",
				MaxTokens:     256,
				Temperature:   ptr(0.0),
				StopSequences: []string{"3."},
				// user_id that is not a string is not passed on.
				Metadata: json.RawMessage(`{"user_id":42}`),
				Messages: []sampler.Message{user(text("List two fruits, numbered."))},
			},
			reply: "stop_sequence.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text("1. Apples\n2. Pears\n")},
				StopReason: sampler.StopStopSequence,
				Usage:      sampler.Usage{InputTokens: 20, OutputTokens: 12},
			},
		},
		{
			name: "schema_native",
			req: sampler.Request{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				Messages:  []sampler.Message{extract},
				Schema:    json.RawMessage(contactSchema),
			},
			reply: "schema_native.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text(`{"name":"John Smith","email":"john@example.com","plan_interest":"Enterprise","demo_requested":true}`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 182, OutputTokens: 31},
			},
		},
		{
			name: "schema_tool",
			req: sampler.Request{
				Model:     "claude-3-5-haiku-20241022",
				MaxTokens: 1024,
				Messages:  []sampler.Message{extract},
				Schema:    json.RawMessage(contactSchema),
			},
			reply: "schema_tool.json",
			want: &sampler.Response{
				Model:      "claude-3-5-haiku-20241022",
				Content:    []sampler.Content{text(`{"name":"John Smith","email":"john@example.com","plan_interest":"Enterprise","demo_requested":true}`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 472, OutputTokens: 58},
			},
		},
		{
			name: "schema_tool_wrapped",
			req: sampler.Request{
				Model:     "claude-3-5-haiku-20241022",
				MaxTokens: 1024,
				Messages:  []sampler.Message{user(text("Name the three primary colours of light."))},
				Schema:    json.RawMessage(`{"type":"array","items":{"type":"string"},"minItems":3}`),
			},
			reply: "schema_tool_wrapped.json",
			want: &sampler.Response{
				Model:      "claude-3-5-haiku-20241022",
				Content:    []sampler.Content{text(`["red","green","blue"]`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 401, OutputTokens: 44},
			},
		},
		{
			// No respond call: the text is kept for the Service to report
			// as a parse error, and the stop reason tells why.
			name: "schema_tool_refused",
			req: sampler.Request{
				Model:     "claude-3-5-haiku-20241022",
				MaxTokens: 1024,
				Messages:  []sampler.Message{extract},
				Schema:    json.RawMessage(contactSchema),
			},
			reply: "refusal.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text("I can't help with that.")},
				StopReason: sampler.StopRefusal,
				Usage:      sampler.Usage{InputTokens: 24, OutputTokens: 9},
			},
		},
		{
			name: "tool_call",
			req: sampler.Request{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				Messages:  []sampler.Message{user(text("What's the weather like in San Francisco?"))},
				Tools:     []sampler.Tool{weatherTool()},
			},
			reply: "tool_use.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{toolUse("toolu_01A09q90qw90lq917835lq9", "get_weather", `{"location":"San Francisco, CA","unit":"celsius"}`)},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 384, OutputTokens: 57},
			},
		},
		{
			name: "parallel_tool_calls",
			req: sampler.Request{
				Model:      "claude-sonnet-4-5",
				MaxTokens:  1024,
				Messages:   []sampler.Message{user(text("What's the weather and the time in San Francisco?"))},
				Tools:      []sampler.Tool{weatherTool(), timeTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired},
			},
			reply: "parallel_tool_use.json",
			want: &sampler.Response{
				Model: "claude-sonnet-4-5-20250929",
				Content: []sampler.Content{
					text("I'll check the weather and the time in San Francisco."),
					toolUse("toolu_01WeatherSF", "get_weather", `{"location":"San Francisco, CA"}`),
					toolUse("toolu_01TimeSF", "get_time", `{"timezone":"America/Los_Angeles"}`),
				},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 512, OutputTokens: 112},
			},
		},
		{
			name: "tool_choice_named",
			req: sampler.Request{
				Model:      "claude-sonnet-4-5",
				MaxTokens:  1024,
				Messages:   []sampler.Message{user(text("Weather in San Francisco, please."))},
				Tools:      []sampler.Tool{weatherTool(), timeTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "get_weather"},
			},
			reply: "tool_use.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{toolUse("toolu_01A09q90qw90lq917835lq9", "get_weather", `{"location":"San Francisco, CA","unit":"celsius"}`)},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 384, OutputTokens: 57},
			},
		},
		{
			name: "parallel_disabled",
			req: sampler.Request{
				Model:      "claude-sonnet-4-5",
				MaxTokens:  1024,
				Messages:   []sampler.Message{user(text("Weather in San Francisco, please."))},
				Tools:      []sampler.Tool{weatherTool(), timeTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired, DisableParallelToolUse: true},
			},
			reply: "tool_use.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{toolUse("toolu_01A09q90qw90lq917835lq9", "get_weather", `{"location":"San Francisco, CA","unit":"celsius"}`)},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 384, OutputTokens: 57},
			},
		},
		{
			name: "tool_results",
			req: sampler.Request{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				Messages: []sampler.Message{
					user(text("What's the weather and the time in San Francisco?")),
					assistant(
						text("I'll check the weather and the time in San Francisco."),
						toolUse("toolu_01WeatherSF", "get_weather", `{"location": "San Francisco, CA"}`),
						toolUse("toolu_01TimeSF", "get_time", `{"timezone": "America/Los_Angeles"}`),
					),
					user(
						sampler.Content{
							Type:              sampler.BlockToolResult,
							ToolUseID:         "toolu_01WeatherSF",
							Content:           []sampler.Content{text("15°C, sunny")},
							StructuredContent: json.RawMessage(`{"temperature": 15, "unit": "celsius", "sky": "sunny"}`),
							IsError:           ptr(false),
						},
						sampler.Content{
							Type:      sampler.BlockToolResult,
							ToolUseID: "toolu_01TimeSF",
							Content:   []sampler.Content{text("time service unavailable")},
							IsError:   ptr(true),
						},
					),
				},
				Tools:      []sampler.Tool{weatherTool(), timeTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceNone},
			},
			reply: "tool_results.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text("It is 15°C and sunny in San Francisco. I could not get the local time.")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 689, OutputTokens: 24},
			},
		},
		{
			name: "refusal",
			req: sampler.Request{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				Messages:  []sampler.Message{user(text("Help me with something harmful."))},
			},
			reply: "refusal.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text("I can't help with that.")},
				StopReason: sampler.StopRefusal,
				Usage:      sampler.Usage{InputTokens: 24, OutputTokens: 9},
			},
		},
		{
			name: "max_tokens",
			req: sampler.Request{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 8,
				Messages:  []sampler.Message{user(text("Tell me a long story."))},
			},
			reply: "max_tokens.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text("Once upon a time, in a")},
				StopReason: sampler.StopMaxTokens,
				Usage:      sampler.Usage{InputTokens: 14, OutputTokens: 8},
			},
		},
		{
			name: "pause_turn_passed_through",
			req: sampler.Request{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 64,
				// The empty assistant turn (a failed attempt that said
				// nothing) is left out: the API rejects empty text.
				Messages: []sampler.Message{user(text("Search on.")), assistant(text("")), user(text("Go on."))},
			},
			reply: "pause_turn.json",
			want: &sampler.Response{
				Model:      "claude-sonnet-4-5-20250929",
				Content:    []sampler.Content{text("Let me keep looking.")},
				StopReason: "pause_turn",
				Usage:      sampler.Usage{InputTokens: 120, OutputTokens: 6},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{file: tt.reply})
			got, err := f.provider().Sample(context.Background(), &tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(reqs))
			}
			checkHeaders(t, reqs)
			checkGolden(t, tt.name, reqs[0].body)
		})
	}
}

// upstreamView is what the tests check of an *sampler.UpstreamError.
type upstreamView struct {
	Provider   string
	Status     int
	Timeout    bool
	RetryAfter time.Duration
	Message    string
	Retryable  bool
	Reason     string
}

func viewOf(t *testing.T, err error) upstreamView {
	t.Helper()
	var ue *sampler.UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("error %T %v is not an *sampler.UpstreamError", err, err)
	}
	noKey(t, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", ue))
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		noKey(t, e.Error())
	}
	return upstreamView{
		Provider: ue.Provider, Status: ue.Status, Timeout: ue.Timeout, RetryAfter: ue.RetryAfter,
		Message: ue.Message, Retryable: ue.Retryable(), Reason: ue.Reason(),
	}
}

func TestSampleUpstreamErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  upstreamView
	}{
		{
			name:  "rate_limited",
			reply: reply{status: http.StatusTooManyRequests, file: "error_429.json", header: map[string]string{"retry-after": "7"}},
			want: upstreamView{Provider: "anthropic", Status: 429, RetryAfter: 7 * time.Second,
				Message: "Number of request tokens has exceeded your per-minute rate limit", Retryable: true, Reason: "rate_limited"},
		},
		{
			name:  "server_error",
			reply: reply{status: http.StatusInternalServerError, file: "error_500.json"},
			want:  upstreamView{Provider: "anthropic", Status: 500, Message: "Internal server error", Retryable: true, Reason: "server_error"},
		},
		{
			name:  "overloaded",
			reply: reply{status: 529, file: "error_529.json"},
			want:  upstreamView{Provider: "anthropic", Status: 529, Message: "Overloaded", Retryable: true, Reason: "server_error"},
		},
		{
			name:  "bad_request",
			reply: reply{status: http.StatusBadRequest, file: "error_400.json"},
			want:  upstreamView{Provider: "anthropic", Status: 400, Message: "messages: text content blocks must be non-empty", Reason: "client_error"},
		},
		{
			name:  "unauthorized_echoing_the_key",
			reply: reply{status: http.StatusUnauthorized, file: "error_401.json"},
			want:  upstreamView{Provider: "anthropic", Status: 401, Message: "invalid x-api-key: [redacted]", Reason: "client_error"},
		},
		{
			name:  "error_without_documented_body",
			reply: reply{status: http.StatusBadGateway, body: "<html>bad gateway</html>"},
			want:  upstreamView{Provider: "anthropic", Status: 502, Message: "Bad Gateway", Retryable: true, Reason: "server_error"},
		},
		{
			name:  "malformed_success",
			reply: reply{body: `{"id": "msg_1", "content": [`},
			// An answer came, with its status: not a connection failure,
			// and not retried, as with the other adapters.
			want: upstreamView{Provider: "anthropic", Status: 200, Message: "malformed response", Retryable: false, Reason: "client_error"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			_, err := f.provider().Sample(context.Background(), &sampler.Request{
				Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))},
			})
			if diff := cmp.Diff(tt.want, viewOf(t, err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			// The SDK must not retry on its own.
			if n := len(f.requests()); n != 1 {
				t.Errorf("upstream saw %d requests, want 1", n)
			}
			checkHeaders(t, f.requests())
		})
	}
}

func TestSampleConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := New(Options{BaseURL: url, APIKey: testKey, HTTPClient: &http.Client{Transport: &http.Transport{}}})
	_, err := p.Sample(context.Background(), &sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))}})
	want := upstreamView{Provider: "anthropic", Message: "connection failed", Retryable: true, Reason: "connection"}
	if diff := cmp.Diff(want, viewOf(t, err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestSampleSilentUpstreamTimesOut(t *testing.T) {
	f := newFake(t, reply{block: true})
	// No HTTPClient: the provider's own client with a short header timeout.
	p := New(Options{Name: "claude", BaseURL: f.srv.URL, APIKey: testKey, ResponseHeaderTimeout: 100 * time.Millisecond})
	_, err := p.Sample(context.Background(), &sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))}})
	want := upstreamView{Provider: "claude", Timeout: true, Message: "no answer in time", Retryable: true, Reason: "timeout"}
	if diff := cmp.Diff(want, viewOf(t, err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("a timeout must not read as a cancellation: %v", err)
	}
	<-f.gone // the upstream saw the client give up
}

func TestSampleCancelled(t *testing.T) {
	f := newFake(t, reply{block: true})
	p := f.provider()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := p.Sample(ctx, &sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))}})
		errc <- err
	}()
	<-f.arrived
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false, want true", err)
	}
	view := viewOf(t, err)
	if view.Timeout {
		t.Errorf("a cancellation must not read as a timeout: %+v", view)
	}
	if retry.Retryable(err) {
		t.Errorf("retry.Retryable(%v) = true, want false", err)
	}
	<-f.gone // the upstream saw the request go away
}

func TestSampleInvalid(t *testing.T) {
	tests := []struct {
		name string
		req  sampler.Request
		want []sampler.FieldError
	}{
		{
			name: "audio",
			req: sampler.Request{Messages: []sampler.Message{user(text("Listen:"),
				sampler.Content{Type: sampler.BlockAudio, Data: "AAAA", MIMEType: "audio/wav"})}},
			want: []sampler.FieldError{{Path: "/messages/0/content/1", Message: "provider anthropic does not accept audio"}},
		},
		{
			name: "image_type",
			req: sampler.Request{Messages: []sampler.Message{user(text("Look:")),
				assistant(text("Where?")),
				user(sampler.Content{Type: sampler.BlockImage, Data: "Qk0=", MIMEType: "image/bmp"})}},
			want: []sampler.FieldError{{Path: "/messages/2/content/0", Message: "provider anthropic does not accept image type image/bmp"}},
		},
		{
			name: "audio_in_tool_result",
			req: sampler.Request{Messages: []sampler.Message{
				user(text("Record it.")),
				assistant(toolUse("toolu_1", "record", `{}`)),
				user(sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "toolu_1",
					Content: []sampler.Content{{Type: sampler.BlockAudio, Data: "AAAA", MIMEType: "audio/wav"}}}),
			}},
			want: []sampler.FieldError{{Path: "/messages/2/content/0/content/0", Message: "provider anthropic does not accept audio"}},
		},
		{
			name: "temperature_above_one",
			req:  sampler.Request{Temperature: ptr(1.5), Messages: []sampler.Message{user(text("Hi"))}},
			want: []sampler.FieldError{{Path: "/temperature", Message: "provider anthropic accepts temperature between 0 and 1"}},
		},
	}
	f := newFake(t)
	p := f.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Model, tt.req.MaxTokens = "claude-sonnet-4-5", 16
			_, err := p.Sample(context.Background(), &tt.req)
			var ie *sampler.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T %v, want *sampler.InvalidError", err, err)
			}
			if diff := cmp.Diff(tt.want, ie.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("upstream saw %d requests, want none", n)
	}
}

// newService returns a Service whose one model is anthropic/<model>,
// retrying upstream failures without waiting.
func newService(t *testing.T, p *Provider, model string) *sampler.Service {
	t.Helper()
	cat := sampler.NewCatalog([]sampler.Model{{Provider: p.Name(), Name: model}}, "")
	svc, err := sampler.New(sampler.Options{
		Providers: []sampler.Provider{p},
		Catalog:   cat,
		Upstream:  retry.Upstream{Rand: func() float64 { return 0 }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestServiceRetriesServerError(t *testing.T) {
	f := newFake(t, reply{status: http.StatusInternalServerError, file: "error_500.json"}, reply{file: "text.json"})
	svc := newService(t, f.provider(), "claude-sonnet-4-5")
	res, err := svc.Sample(context.Background(), &sampler.Params{Request: sampler.Request{
		MaxTokens: 64, Messages: []sampler.Message{user(text("Hi"))},
	}})
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	if want := "Hello! The image shows a red square."; res.Text != want {
		t.Errorf("text = %q, want %q", res.Text, want)
	}
	reqs := f.requests()
	// Exactly two: one failure, one retry by the Service. The SDK itself
	// does not retry (it would also count in X-Stainless-Retry-Count).
	if len(reqs) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(reqs))
	}
	checkHeaders(t, reqs)
	for i, r := range reqs {
		if c := r.header.Get("X-Stainless-Retry-Count"); c != "0" {
			t.Errorf("request %d: X-Stainless-Retry-Count = %q, want 0", i, c)
		}
	}
}

func TestServiceGivesUpOnBadRequest(t *testing.T) {
	f := newFake(t, reply{status: http.StatusBadRequest, file: "error_400.json"})
	svc := newService(t, f.provider(), "claude-sonnet-4-5")
	_, err := svc.Sample(context.Background(), &sampler.Params{Request: sampler.Request{
		MaxTokens: 64, Messages: []sampler.Message{user(text("Hi"))},
	}})
	if v := viewOf(t, err); v.Status != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", v.Status)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("upstream saw %d requests, want 1", n)
	}
}

func TestSampleToolsRetryGolden(t *testing.T) {
	f := newFake(t, reply{file: "tools_invalid_args.json"}, reply{file: "tools_valid_args.json"})
	svc := newService(t, f.provider(), "claude-sonnet-4-5")
	tool := sampler.Tool{
		Name:        "get_weather",
		Description: "Get the current weather in a given location",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}`),
	}
	res, err := svc.SampleTools(context.Background(), &sampler.Params{Request: sampler.Request{
		MaxTokens: 256,
		Messages:  []sampler.Message{user(text("What's the weather in Paris?"))},
		Tools:     []sampler.Tool{tool},
	}})
	if err != nil {
		t.Fatalf("SampleTools: %v", err)
	}
	want := []sampler.ToolCall{{ID: "toolu_01GoodArgs", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris, France"}`)}}
	if diff := cmp.Diff(want, res.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if res.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", res.Attempts)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(reqs))
	}
	checkHeaders(t, reqs)
	checkGolden(t, "sample_tools_retry", reqs[1].body)

	// Beyond the golden: the failed call is answered by an error tool_result.
	msgs := decode(t, reqs[1].body)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3", len(msgs))
	}
	last := msgs[2].(map[string]any)
	block := last["content"].([]any)[0].(map[string]any)
	if last["role"] != "user" || block["type"] != "tool_result" || block["tool_use_id"] != "toolu_01BadArgs" || block["is_error"] != true {
		t.Errorf("corrective turn = %v, want a user tool_result for toolu_01BadArgs with is_error true", last)
	}
}

func TestSampleSchemaRetryGolden(t *testing.T) {
	f := newFake(t, reply{file: "schema_invalid_json.json"}, reply{file: "schema_native.json"})
	svc := newService(t, f.provider(), "claude-sonnet-4-5")
	res, err := svc.SampleSchema(context.Background(), &sampler.Params{Request: sampler.Request{
		MaxTokens: 256,
		Messages:  []sampler.Message{user(text("Extract the contact: John Smith (john@example.com) wants an Enterprise demo."))},
		Schema:    json.RawMessage(contactSchema),
	}})
	if err != nil {
		t.Fatalf("SampleSchema: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(res.Parsed, &got); err != nil {
		t.Fatalf("parsed %s: %v", res.Parsed, err)
	}
	want := map[string]any{"name": "John Smith", "email": "john@example.com", "plan_interest": "Enterprise", "demo_requested": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	if res.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", res.Attempts)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(reqs))
	}
	checkHeaders(t, reqs)
	checkGolden(t, "sample_schema_retry", reqs[1].body)
}

func TestEnvironmentIgnored(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "env-token")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-From-Env: yes")
	f := newFake(t, reply{file: "text.json"})
	if _, err := f.provider().Sample(context.Background(), &sampler.Request{
		Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))},
	}); err != nil {
		t.Fatalf("Sample: %v", err)
	}
	reqs := f.requests()
	checkHeaders(t, reqs)
	for _, h := range []string{"Authorization", "X-From-Env"} {
		if v := reqs[0].header.Get(h); v != "" {
			t.Errorf("header %s = %q taken from the environment, want none", h, v)
		}
	}
}

func TestName(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "default", want: "anthropic"},
		{name: "configured", opts: Options{Name: "claude"}, want: "claude"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(tt.opts).Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNativeStructuredOutputOption(t *testing.T) {
	f := newFake(t, reply{file: "schema_tool.json"})
	p := New(Options{BaseURL: f.srv.URL, APIKey: testKey, HTTPClient: f.srv.Client(),
		NativeStructuredOutput: func(string) bool { return false }})
	if _, err := p.Sample(context.Background(), &sampler.Request{
		Model: "claude-sonnet-4-5", MaxTokens: 64, Messages: []sampler.Message{user(text("Extract."))}, Schema: json.RawMessage(contactSchema),
	}); err != nil {
		t.Fatalf("Sample: %v", err)
	}
	body := decode(t, f.requests()[0].body)
	if _, ok := body["output_config"]; ok {
		t.Errorf("output_config sent although NativeStructuredOutput says no")
	}
	if tc, _ := body["tool_choice"].(map[string]any); tc["type"] != "tool" || tc["name"] != RespondTool {
		t.Errorf("tool_choice = %v, want the forced respond tool", body["tool_choice"])
	}
}

func TestSupportsNativeStructuredOutput(t *testing.T) {
	tests := []struct {
		model string
		want  bool
	}{
		{"claude-sonnet-4-5", true},
		{"claude-sonnet-4-5-20250929", true},
		{"claude-opus-4-1", true},
		{"claude-opus-4-1-20250805", true},
		{"claude-opus-4-5-20251101", true},
		{"claude-haiku-4-5", true},
		{"claude-opus-4-6", true},
		{"claude-sonnet-4-6", true},
		{"claude-sonnet-5", true},
		{"claude-sonnet-5-5", true},
		{"anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{"claude-sonnet-4-5@20250929", true},
		{"Claude-Haiku-4-5", true},
		{"claude-3-5-haiku-20241022", false},
		{"claude-3-7-sonnet-20250219", false},
		{"claude-sonnet-4-20250514", false},
		{"claude-opus-4-0", false},
		{"claude-opus-4-20250514", false},
		{"claude-sonnet-4-1", false},
		{"claude-2.1", false},
		{"claude-instant-1.2", false},
		{"gpt-4o", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := SupportsNativeStructuredOutput(tt.model); got != tt.want {
				t.Errorf("SupportsNativeStructuredOutput(%q) = %v, want %v", tt.model, got, tt.want)
			}
		})
	}
}

func TestStopReason(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"end_turn", sampler.StopEndTurn},
		{"max_tokens", sampler.StopMaxTokens},
		{"stop_sequence", sampler.StopStopSequence},
		{"tool_use", sampler.StopToolUse},
		{"refusal", sampler.StopRefusal},
		{"pause_turn", "pause_turn"},
		{"model_context_window_exceeded", "model_context_window_exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := stopReason(tt.in); got != tt.want {
				t.Errorf("stopReason(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestToolResultStructuredOnce: a tool result whose text block already
// holds its structuredContent (as MCP asks tools to send it) reaches the
// model once, not twice; other structured content is appended as text.
func TestToolResultStructuredOnce(t *testing.T) {
	p := New(Options{APIKey: "k"})
	for _, tt := range []struct {
		name string
		text string
		want []string
	}{
		{"text holds it", `{"temperature": 15}`, []string{`{"temperature": 15}`}},
		{"text differs", "15°C", []string{"15°C", `{"temperature":15}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := p.toolResult(sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "t1",
				Content: []sampler.Content{text(tt.text)}, StructuredContent: json.RawMessage(`{"temperature":15}`)}, "/messages/0/content/0")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range tr.Content {
				if b.OfText == nil {
					t.Fatalf("a non-text block: %+v", b)
				}
				got = append(got, b.OfText.Text)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("text blocks (-want +got):\n%s", diff)
			}
		})
	}
}
