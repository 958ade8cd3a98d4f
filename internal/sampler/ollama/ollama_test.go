package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	weatherTool = `{"name":"get_current_weather","description":"Get the current weather for a location","inputSchema":{"type":"object","properties":{"location":{"type":"string","description":"The location to get the weather for, e.g. San Francisco, CA"},"format":{"type":"string","description":"The format to return the weather in, e.g. 'celsius' or 'fahrenheit'","enum":["celsius","fahrenheit"]}},"required":["location","format"]}}`
	timeTool    = `{"name":"get_current_time","description":"Get the current time in a time zone","inputSchema":{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}}`
	ageSchema   = `{"type":"object","properties":{"age":{"type":"integer"},"available":{"type":"boolean"}},"required":["age","available"]}`
	// onePixelPNG is a 1x1 PNG, base64.
	onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

func tools(t *testing.T, defs ...string) []sampler.Tool {
	t.Helper()
	out := make([]sampler.Tool, len(defs))
	for i, d := range defs {
		if err := json.Unmarshal([]byte(d), &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var (
	user      = sampler.UserMessage
	assistant = sampler.AssistantMessage
	text      = sampler.TextBlock
)

func toolUse(id, name, input string) sampler.Content {
	return sampler.Content{Type: sampler.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(input)}
}

func ptr[T any](v T) *T { return &v }

func TestSample(t *testing.T) {
	tests := []struct {
		name  string
		req   *sampler.Request
		reply string
		want  *sampler.Response
		// wantTools are the tool names the body declares; nil means no
		// "tools" member at all.
		wantTools []string
		check     func(t *testing.T, b wireBody)
	}{
		{
			name: "text",
			req: &sampler.Request{
				Model:         "llama3.2",
				SystemPrompt:  "You are a friendly assistant.",
				Messages:      []sampler.Message{user(text("Hello!"), text("Please answer in one sentence."))},
				MaxTokens:     256,
				Temperature:   ptr(0.7),
				StopSequences: []string{"\n\nUser:"},
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{text("Hello! How are you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 26, OutputTokens: 298},
			},
			check: func(t *testing.T, b wireBody) {
				if diff := cmp.Diff([]string{"system", "user"}, b.roles()); diff != "" {
					t.Errorf("roles (-want +got):\n%s", diff)
				}
				if got, want := b.Messages[1].Content, "Hello!\nPlease answer in one sentence."; got != want {
					t.Errorf("user content = %q, want %q", got, want)
				}
				wantOpts := map[string]any{"num_predict": 256.0, "temperature": 0.7, "stop": []any{"\n\nUser:"}}
				if diff := cmp.Diff(wantOpts, b.Options); diff != "" {
					t.Errorf("options (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "structured",
			req: &sampler.Request{
				Model:       "llama3.1",
				Messages:    []sampler.Message{user(text("Ollama is 22 years old and busy saving the world. Return a JSON object with the age and availability."))},
				MaxTokens:   128,
				Temperature: ptr(0.0),
				Schema:      json.RawMessage(ageSchema),
			},
			reply: "structured.json",
			want: &sampler.Response{
				Model:      "llama3.1",
				Content:    []sampler.Content{text(`{"age": 22, "available": false}`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 34, OutputTokens: 12},
			},
			check: func(t *testing.T, b wireBody) {
				var got, want any
				if err := json.Unmarshal(b.Format, &got); err != nil {
					t.Fatalf("format: %v", err)
				}
				_ = json.Unmarshal([]byte(ageSchema), &want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("format is not the schema object (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "tool_call",
			req: &sampler.Request{
				Model:     "llama3.2",
				Messages:  []sampler.Message{user(text("What is the weather today in Paris?"))},
				MaxTokens: 256,
				Tools:     tools(t, weatherTool),
			},
			reply: "tool_call.json",
			want: &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{toolUse("call_0_7e069917", "get_current_weather", `{"format":"celsius","location":"Paris, FR"}`)},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 122, OutputTokens: 33},
			},
			wantTools: []string{"get_current_weather"},
		},
		{
			name: "parallel_tool_calls",
			req: &sampler.Request{
				Model:     "llama3.2",
				Messages:  []sampler.Message{user(text("What is the weather in Paris and in London?"))},
				MaxTokens: 256,
				Tools:     tools(t, weatherTool, timeTool),
			},
			reply: "parallel_tool_calls.json",
			want: &sampler.Response{
				Model: "llama3.2",
				Content: []sampler.Content{
					toolUse("call_0_7e069917", "get_current_weather", `{"format":"celsius","location":"Paris, FR"}`),
					toolUse("call_1_5f4375dc", "get_current_weather", `{"format":"celsius","location":"London, UK"}`),
				},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 131, OutputTokens: 58},
			},
			wantTools: []string{"get_current_weather", "get_current_time"},
		},
		{
			name: "tool_results",
			req: &sampler.Request{
				Model: "llama3.2",
				Messages: []sampler.Message{
					user(text("What is the weather in Paris and in London?")),
					assistant(
						text("Let me check both cities."),
						toolUse("call_0_7e069917", "get_current_weather", `{"format":"celsius","location":"Paris, FR"}`),
						toolUse("call_1_5f4375dc", "get_current_weather", `{"format":"celsius","location":"London, UK"}`),
					),
					user(
						sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "call_0_7e069917",
							Content:           []sampler.Content{text("22°C, sunny")},
							StructuredContent: json.RawMessage(`{"temperature": 22, "conditions": "sunny"}`)},
						sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "call_1_5f4375dc",
							Content: []sampler.Content{text("weather service unavailable")}, IsError: ptr(true)},
					),
				},
				MaxTokens: 256,
				Tools:     tools(t, weatherTool),
			},
			reply: "after_tool_results.json",
			want: &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{text("It is 22°C and sunny in Paris. I could not get the weather for London: the weather service is unavailable.")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 201, OutputTokens: 29},
			},
			wantTools: []string{"get_current_weather"},
			check: func(t *testing.T, b wireBody) {
				if diff := cmp.Diff([]string{"user", "assistant", "tool", "tool"}, b.roles()); diff != "" {
					t.Fatalf("roles (-want +got):\n%s", diff)
				}
				if got := len(b.Messages[1].ToolCalls); got != 2 {
					t.Errorf("assistant tool_calls = %d, want 2", got)
				}
				type toolMsg struct{ Name, Content string }
				want := []toolMsg{
					{"get_current_weather", "22°C, sunny\n{\"temperature\":22,\"conditions\":\"sunny\"}"},
					{"get_current_weather", "Error: weather service unavailable"},
				}
				got := []toolMsg{{b.Messages[2].ToolName, b.Messages[2].Content}, {b.Messages[3].ToolName, b.Messages[3].Content}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("tool messages (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "tool_choice_none",
			req: &sampler.Request{
				Model:      "llama3.2",
				Messages:   []sampler.Message{user(text("Say hello."))},
				MaxTokens:  256,
				Tools:      tools(t, weatherTool, timeTool),
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceNone},
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{text("Hello! How are you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 26, OutputTokens: 298},
			},
			wantTools: nil,
		},
		{
			name: "tool_choice_named",
			req: &sampler.Request{
				Model:      "llama3.2",
				Messages:   []sampler.Message{user(text("What is the weather today in Paris?"))},
				MaxTokens:  256,
				Tools:      tools(t, timeTool, weatherTool),
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "get_current_weather"},
			},
			reply: "tool_call.json",
			want: &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{toolUse("call_0_7e069917", "get_current_weather", `{"format":"celsius","location":"Paris, FR"}`)},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 122, OutputTokens: 33},
			},
			wantTools: []string{"get_current_weather"},
		},
		{
			// Ollama cannot force a call: the text answer comes back as it
			// is and the Service's guaranteed helper retries.
			name: "tool_choice_required_text_only",
			req: &sampler.Request{
				Model:      "llama3.2",
				Messages:   []sampler.Message{user(text("What is the weather today in Paris?"))},
				MaxTokens:  256,
				Tools:      tools(t, weatherTool, timeTool),
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired},
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{text("Hello! How are you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 26, OutputTokens: 298},
			},
			wantTools: []string{"get_current_weather", "get_current_time"},
		},
		{
			name: "max_tokens",
			req: &sampler.Request{
				Model:     "llama3.2",
				Messages:  []sampler.Message{user(text("Why is the sky blue?"))},
				MaxTokens: 16,
			},
			reply: "max_tokens.json",
			want: &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{text("The sky is blue because of a phenomenon called Rayleigh scattering. Sunlight")},
				StopReason: sampler.StopMaxTokens,
				Usage:      sampler.Usage{InputTokens: 26, OutputTokens: 16},
			},
			check: func(t *testing.T, b wireBody) {
				if diff := cmp.Diff(map[string]any{"num_predict": 16.0}, b.Options); diff != "" {
					t.Errorf("options (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "image",
			req: &sampler.Request{
				Model: "llava",
				Messages: []sampler.Message{user(
					text("what is in this image?"),
					sampler.Content{Type: sampler.BlockImage, Data: onePixelPNG, MIMEType: "image/png"},
				)},
				MaxTokens: 256,
			},
			reply: "image.json",
			want: &sampler.Response{
				Model:      "llava",
				Content:    []sampler.Content{text(" The image features a cute, little pig with an angry facial expression. It's wearing a heart on its shirt and is waving in the air. This scene appears to be part of a drawing or sketching project.")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 26, OutputTokens: 83},
			},
			check: func(t *testing.T, b wireBody) {
				m := b.Messages[0]
				if m.Content != "what is in this image?" {
					t.Errorf("content = %q, want the text only", m.Content)
				}
				if diff := cmp.Diff([]string{onePixelPNG}, m.Images); diff != "" {
					t.Errorf("images (-want +got):\n%s", diff)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{file: tt.reply})
			got, err := f.provider(t).Sample(t.Context(), tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			bodies := f.requests()
			if len(bodies) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(bodies))
			}
			checkGolden(t, tt.name, bodies[0])
			b := decodeBody(t, bodies[0])
			if diff := cmp.Diff(tt.wantTools, b.toolNames()); diff != "" {
				t.Errorf("tools sent (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, b)
			}
		})
	}
}

func TestSampleInvalid(t *testing.T) {
	tests := []struct {
		name     string
		req      *sampler.Request
		wantPath string
	}{
		{
			name:     "audio in a user message",
			req:      &sampler.Request{Messages: []sampler.Message{user(text("listen"), sampler.Content{Type: sampler.BlockAudio, Data: "AAAA", MIMEType: "audio/wav"})}},
			wantPath: "/messages/0/content/1",
		},
		{
			name: "audio in a tool result",
			req: &sampler.Request{Messages: []sampler.Message{
				user(text("record it")),
				assistant(toolUse("c1", "record", `{}`)),
				user(sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1",
					Content: []sampler.Content{text("done"), {Type: sampler.BlockAudio, Data: "AAAA", MIMEType: "audio/wav"}}}),
			}},
			wantPath: "/messages/2/content/0/content/1",
		},
		{
			name: "tool result answering no tool use",
			req: &sampler.Request{Messages: []sampler.Message{
				user(text("hi")),
				assistant(toolUse("c1", "record", `{}`)),
				user(sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c2", Content: []sampler.Content{text("done")}}),
			}},
			wantPath: "/messages/2/content/0/toolUseId",
		},
		{
			name: "forced tool not declared",
			req: &sampler.Request{Messages: []sampler.Message{user(text("hi"))}, Tools: tools(t, weatherTool),
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "get_current_time"}},
			wantPath: "/toolChoice/name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			_, err := f.provider(t).Sample(t.Context(), tt.req)
			var ie *sampler.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Sample error = %v, want a *sampler.InvalidError", err)
			}
			if len(ie.Errors) != 1 || ie.Errors[0].Path != tt.wantPath {
				t.Errorf("errors = %+v, want one at %s", ie.Errors, tt.wantPath)
			}
			if got := len(f.requests()); got != 0 {
				t.Errorf("upstream saw %d requests, want 0", got)
			}
		})
	}
}

// upstreamOpts compares UpstreamErrors without their wrapped cause.
var upstreamOpts = cmpopts.IgnoreFields(sampler.UpstreamError{}, "Err")

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name          string
		reply         reply
		want          *sampler.UpstreamError
		wantRetryable bool
	}{
		{
			name:          "429 with Retry-After",
			reply:         reply{status: 429, file: "error_busy.json", retryAfter: "7"},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 429, RetryAfter: 7 * time.Second, Message: "server busy, please try again.  maximum pending requests exceeded"},
			wantRetryable: true,
		},
		{
			name:          "503 overloaded",
			reply:         reply{status: 503, file: "error_busy.json"},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 503, Message: "server busy, please try again.  maximum pending requests exceeded"},
			wantRetryable: true,
		},
		{
			name:          "500",
			reply:         reply{status: 500, file: "error_server.json"},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 500, Message: "llama runner process has terminated: exit status 2"},
			wantRetryable: true,
		},
		{
			name:          "404 model not found",
			reply:         reply{status: 404, file: "error_model_not_found.json"},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 404, Message: `model "llama9" not found, try pulling it first`},
			wantRetryable: false,
		},
		{
			name:          "HTML error page",
			reply:         reply{status: 502, body: "<html><body>Bad Gateway</body></html>"},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 502, Message: "Bad Gateway"},
			wantRetryable: true,
		},
		{
			name:          "long message is truncated",
			reply:         reply{status: 400, body: `{"error":"` + strings.Repeat("é", 400) + `"}`},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 400, Message: strings.Repeat("é", 300)},
			wantRetryable: false,
		},
		{
			name:          "error member in a 200 body",
			reply:         reply{body: `{"error":"an error was encountered while running the model"}`},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 200, Message: "an error was encountered while running the model"},
			wantRetryable: false,
		},
		{
			name:          "malformed success body",
			reply:         reply{body: `{"model":"llama3.2","message":`},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 200, Message: "malformed response body"},
			wantRetryable: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			_, err := f.provider(t).Sample(t.Context(), &sampler.Request{Model: "llama9", Messages: []sampler.Message{user(text("hi"))}, MaxTokens: 10})
			var ue *sampler.UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("Sample error = %v, want a *sampler.UpstreamError", err)
			}
			if diff := cmp.Diff(tt.want, ue, upstreamOpts); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got := retry.Retryable(err); got != tt.wantRetryable {
				t.Errorf("retry.Retryable = %v, want %v", got, tt.wantRetryable)
			}
		})
	}
}

// silentUpstream returns a server whose handler answers nothing until its
// request context ends; started is closed when the first request arrives,
// done when the handler saw its context end.
func silentUpstream(t *testing.T) (srv *httptest.Server, started, done <-chan struct{}) {
	t.Helper()
	startedC, doneC := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := calls.Add(1); n > 1 {
			t.Errorf("silent upstream: unexpected request %d", n)
			return
		}
		// Read the body as Ollama does: only then does net/http watch the
		// connection and end r.Context() when the client goes away.
		_, _ = io.Copy(io.Discard, r.Body)
		close(startedC)
		<-r.Context().Done()
		close(doneC)
	}))
	t.Cleanup(srv.Close)
	return srv, startedC, doneC
}

func TestTransportErrors(t *testing.T) {
	req := &sampler.Request{Model: "llama3.2", Messages: []sampler.Message{user(text("hi"))}, MaxTokens: 10}
	tests := []struct {
		name string
		// run calls Sample against some upstream and returns a channel
		// closed once the upstream saw the request end (nil when there is
		// no handler to observe) and Sample's error.
		run           func(t *testing.T) (<-chan struct{}, error)
		want          *sampler.UpstreamError
		wantCanceled  bool
		wantDeadline  bool
		wantRetryable bool
	}{
		{
			name: "connection refused",
			run: func(t *testing.T) (<-chan struct{}, error) {
				srv := httptest.NewServer(http.NotFoundHandler())
				url := srv.URL
				srv.Close()
				_, err := newProvider(t, Options{BaseURL: url}).Sample(t.Context(), req)
				return nil, err
			},
			want:          &sampler.UpstreamError{Provider: "ollama", Message: "connection refused; is Ollama running?"},
			wantRetryable: true,
		},
		{
			name: "silent upstream hits ResponseHeaderTimeout",
			run: func(t *testing.T) (<-chan struct{}, error) {
				srv, _, done := silentUpstream(t)
				p := newProvider(t, Options{BaseURL: srv.URL, ResponseHeaderTimeout: 100 * time.Millisecond})
				_, err := p.Sample(t.Context(), req)
				return done, err
			},
			want: &sampler.UpstreamError{Provider: "ollama", Timeout: true, Message: "no answer in time"},
			// net/http's timeout error matches context.DeadlineExceeded.
			wantDeadline:  true,
			wantRetryable: true,
		},
		{
			name: "caller deadline",
			run: func(t *testing.T) (<-chan struct{}, error) {
				srv, _, done := silentUpstream(t)
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				defer cancel()
				_, err := newProvider(t, Options{BaseURL: srv.URL}).Sample(ctx, req)
				return done, err
			},
			want:          &sampler.UpstreamError{Provider: "ollama", Timeout: true, Message: "deadline exceeded before the answer arrived"},
			wantDeadline:  true,
			wantRetryable: true,
		},
		{
			name: "caller cancels",
			run: func(t *testing.T) (<-chan struct{}, error) {
				srv, started, done := silentUpstream(t)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go func() {
					<-started
					cancel()
				}()
				_, err := newProvider(t, Options{BaseURL: srv.URL}).Sample(ctx, req)
				return done, err
			},
			want:          &sampler.UpstreamError{Provider: "ollama", Message: "request cancelled"},
			wantCanceled:  true,
			wantRetryable: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, err := tt.run(t)
			var ue *sampler.UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("Sample error = %v, want a *sampler.UpstreamError", err)
			}
			if diff := cmp.Diff(tt.want, ue, upstreamOpts); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got := errors.Is(err, context.Canceled); got != tt.wantCanceled {
				t.Errorf("errors.Is(err, context.Canceled) = %v, want %v", got, tt.wantCanceled)
			}
			if got := errors.Is(err, context.DeadlineExceeded); got != tt.wantDeadline {
				t.Errorf("errors.Is(err, context.DeadlineExceeded) = %v, want %v", got, tt.wantDeadline)
			}
			if got := retry.Retryable(err); got != tt.wantRetryable {
				t.Errorf("retry.Retryable = %v, want %v", got, tt.wantRetryable)
			}
			if done != nil {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream never saw the request end")
				}
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name         string
		o            Options
		wantName     string
		wantEndpoint string
	}{
		{name: "defaults", wantName: "ollama", wantEndpoint: "http://localhost:11434/api/chat"},
		{name: "configured", o: Options{Name: "gpu-box", BaseURL: "http://gpu:11434/ollama/"}, wantName: "gpu-box", wantEndpoint: "http://gpu:11434/ollama/api/chat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, tt.o)
			if got := p.Name(); got != tt.wantName {
				t.Errorf("Name() = %q, want %q", got, tt.wantName)
			}
			if p.endpoint != tt.wantEndpoint {
				t.Errorf("endpoint = %q, want %q", p.endpoint, tt.wantEndpoint)
			}
			if p.client == http.DefaultClient {
				t.Error("the provider uses http.DefaultClient")
			}
			// Its settings are sampler.NewHTTPClient's (tested there); the
			// timeout's effect is tested above with a silent upstream.
			if p.client.Transport == nil || p.client.Transport == http.DefaultTransport {
				t.Errorf("transport = %T, not one of the provider's own", p.client.Transport)
			}
		})
	}
	t.Run("given client", func(t *testing.T) {
		c := &http.Client{}
		if p := New(Options{HTTPClient: c}); p.client != c {
			t.Error("the given HTTPClient is not used")
		}
	})
}

func TestToolMessage(t *testing.T) {
	tests := []struct {
		name string
		in   sampler.Content
		want chatMessage
	}{
		{
			name: "text blocks joined",
			in:   sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", Content: []sampler.Content{text("line 1"), text("line 2")}},
			want: chatMessage{Role: "tool", ToolName: "t", Content: "line 1\nline 2"},
		},
		{
			name: "structuredContent appended",
			in:   sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", Content: []sampler.Content{text("sunny")}, StructuredContent: json.RawMessage(`{ "t" : 22 }`)},
			want: chatMessage{Role: "tool", ToolName: "t", Content: "sunny\n{\"t\":22}"},
		},
		{
			name: "structuredContent already serialised in a text block",
			in:   sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", Content: []sampler.Content{text(`{"a": 1, "b": [true]}`)}, StructuredContent: json.RawMessage(`{"b":[true],"a":1}`)},
			want: chatMessage{Role: "tool", ToolName: "t", Content: `{"a": 1, "b": [true]}`},
		},
		{
			name: "structuredContent only",
			in:   sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", StructuredContent: json.RawMessage(`{"ok":true}`)},
			want: chatMessage{Role: "tool", ToolName: "t", Content: `{"ok":true}`},
		},
		{
			name: "error",
			in:   sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", Content: []sampler.Content{text("no such file")}, IsError: ptr(true)},
			want: chatMessage{Role: "tool", ToolName: "t", Content: "Error: no such file"},
		},
		{
			name: "isError false",
			in:   sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", Content: []sampler.Content{text("fine")}, IsError: ptr(false)},
			want: chatMessage{Role: "tool", ToolName: "t", Content: "fine"},
		},
		{
			name: "image and resource link",
			in: sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", Content: []sampler.Content{
				text("a chart"),
				{Type: sampler.BlockImage, Data: onePixelPNG, MIMEType: "image/png"},
				{Type: sampler.BlockResourceLink, Name: "chart.png", Extra: map[string]json.RawMessage{"uri": json.RawMessage(`"file:///chart.png"`)}},
			}},
			want: chatMessage{Role: "tool", ToolName: "t", Images: []string{onePixelPNG},
				// A block with members of its own is written with its members
				// sorted, as encoding/json writes a map.
				Content: "a chart\n{\"name\":\"chart.png\",\"type\":\"resource_link\",\"uri\":\"file:///chart.png\"}"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toolMessage("/messages/2/content/0", "t", &tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestResponseMapping(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *sampler.Response
	}{
		{
			name: "no done_reason counts as endTurn",
			body: `{"model":"llama3.2","message":{"role":"assistant","content":"Hi"},"done":true,"prompt_eval_count":3,"eval_count":1}`,
			want: &sampler.Response{Model: "llama3.2", Content: []sampler.Content{text("Hi")}, StopReason: sampler.StopEndTurn, Usage: sampler.Usage{InputTokens: 3, OutputTokens: 1}},
		},
		{
			name: "other done_reason passes through",
			body: `{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true,"done_reason":"load"}`,
			want: &sampler.Response{Model: "llama3.2", Content: []sampler.Content{}, StopReason: "load"},
		},
		{
			name: "tool calls win over length",
			body: `{"model":"m","message":{"role":"assistant","content":"Calling.","tool_calls":[{"function":{"name":"f","arguments":{"b":1, "a":2}}}]},"done":true,"done_reason":"length"}`,
			want: &sampler.Response{Model: "m", Content: []sampler.Content{text("Calling."), toolUse(callID(0, "f", json.RawMessage(`{"b":1,"a":2}`)), "f", `{"b":1,"a":2}`)}, StopReason: sampler.StopToolUse},
		},
		{
			name: "missing and string arguments",
			body: `{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f"}},{"function":{"name":"g","arguments":"{\"x\": 1}"}}]},"done":true,"done_reason":"stop"}`,
			want: &sampler.Response{Model: "m", Content: []sampler.Content{
				toolUse(callID(0, "f", json.RawMessage(`{}`)), "f", `{}`),
				toolUse(callID(1, "g", json.RawMessage(`{"x":1}`)), "g", `{"x":1}`),
			}, StopReason: sampler.StopToolUse},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cr chatResponse
			if err := json.Unmarshal([]byte(tt.body), &cr); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, toResponse(&cr)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
