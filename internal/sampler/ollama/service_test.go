package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// newService returns a Service whose only provider is an ollama Provider
// talking to f; upstream retries do not wait.
func newService(t *testing.T, f *fakeOllama) *sampler.Service {
	t.Helper()
	cat := sampler.NewCatalog([]sampler.Model{
		{Provider: "ollama", Name: "llama3.2"},
		{Provider: "ollama", Name: "llama3.1"},
	}, "ollama/llama3.2")
	svc, err := sampler.New(sampler.Options{
		Providers: []sampler.Provider{f.provider(t)},
		Catalog:   cat,
		Upstream:  retry.Upstream{Rand: func() float64 { return 0 }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestServiceUpstreamRetries(t *testing.T) {
	tests := []struct {
		name         string
		replies      []reply
		wantText     string
		wantStatus   int // of the *sampler.UpstreamError; 0 means success
		wantRequests int
	}{
		{
			name:         "500 then success",
			replies:      []reply{{status: 500, file: "error_server.json"}, {file: "text.json"}},
			wantText:     "Hello! How are you today?",
			wantRequests: 2,
		},
		{
			name:         "404 is not retried",
			replies:      []reply{{status: 404, file: "error_model_not_found.json"}},
			wantStatus:   404,
			wantRequests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.replies...)
			svc := newService(t, f)
			res, err := svc.Sample(t.Context(), &sampler.Params{
				Request:   sampler.Request{Messages: []sampler.Message{user(text("Hello!"))}, MaxTokens: 64},
				ModelSpec: "ollama/llama3.2",
			})
			if got := len(f.requests()); got != tt.wantRequests {
				t.Errorf("upstream saw %d requests, want %d", got, tt.wantRequests)
			}
			if tt.wantStatus != 0 {
				var ue *sampler.UpstreamError
				if !errors.As(err, &ue) || ue.Status != tt.wantStatus {
					t.Fatalf("Sample error = %v, want an *sampler.UpstreamError with status %d", err, tt.wantStatus)
				}
				return
			}
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if res.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", res.Text, tt.wantText)
			}
		})
	}
}

// TestGuaranteedHelpers runs the Service's guaranteed helpers against the
// fake: the first answer fails validation, the corrective turn goes to
// Ollama in its own shape, and the second answer is accepted.
func TestGuaranteedHelpers(t *testing.T) {
	tests := []struct {
		name    string
		replies []reply
		call    func(ctx context.Context, svc *sampler.Service) (*sampler.Result, error)
		// check looks at the result and at the second request body.
		check func(t *testing.T, res *sampler.Result, second wireBody)
	}{
		{
			name:    "sample_tools",
			replies: []reply{{file: "tool_call_invalid.json"}, {file: "tool_call.json"}},
			call: func(ctx context.Context, svc *sampler.Service) (*sampler.Result, error) {
				return svc.SampleTools(ctx, &sampler.Params{
					Request: sampler.Request{
						Messages:  []sampler.Message{user(text("What is the weather today in Paris?"))},
						MaxTokens: 256,
						Tools:     tools(t, weatherTool),
					},
					ModelSpec: "ollama/llama3.2",
				})
			},
			check: func(t *testing.T, res *sampler.Result, second wireBody) {
				want := []sampler.ToolCall{{ID: "call_0_7e069917", Name: "get_current_weather", Arguments: json.RawMessage(`{"format":"celsius","location":"Paris, FR"}`)}}
				if diff := cmp.Diff(want, res.ToolCalls); diff != "" {
					t.Errorf("tool calls (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"user", "assistant", "tool"}, second.roles()); diff != "" {
					t.Fatalf("second request roles (-want +got):\n%s", diff)
				}
				calls := second.Messages[1].ToolCalls
				if len(calls) != 1 || calls[0].Function.Name != "get_current_weather" || !strings.Contains(string(calls[0].Function.Arguments), "kelvin") {
					t.Errorf("assistant tool_calls = %+v, want the failed get_current_weather call", calls)
				}
				tm := second.Messages[2]
				if tm.ToolName != "get_current_weather" || !strings.HasPrefix(tm.Content, "Error: Invalid tool call. Fix these errors") ||
					!strings.Contains(tm.Content, "/toolCalls/0/arguments/format") {
					t.Errorf("tool message = %+v, want the corrective error naming /toolCalls/0/arguments/format", tm)
				}
			},
		},
		{
			name:    "sample_schema",
			replies: []reply{{file: "structured_invalid.json"}, {file: "structured.json"}},
			call: func(ctx context.Context, svc *sampler.Service) (*sampler.Result, error) {
				return svc.SampleSchema(ctx, &sampler.Params{
					Request: sampler.Request{
						Messages:  []sampler.Message{user(text("Ollama is 22 years old and busy saving the world. Return a JSON object with the age and availability."))},
						MaxTokens: 128,
						Schema:    json.RawMessage(ageSchema),
					},
					ModelSpec: "ollama/llama3.1",
				})
			},
			check: func(t *testing.T, res *sampler.Result, second wireBody) {
				if got, want := string(res.Parsed), `{"age": 22, "available": false}`; got != want {
					t.Errorf("Parsed = %s, want %s", got, want)
				}
				if diff := cmp.Diff([]string{"user", "assistant", "user"}, second.roles()); diff != "" {
					t.Fatalf("second request roles (-want +got):\n%s", diff)
				}
				if got := second.Messages[1].Content; got != "Sure! Ollama is {age: 22, available: no}" {
					t.Errorf("assistant content = %q, want the failed answer", got)
				}
				if got := second.Messages[2].Content; !strings.HasPrefix(got, "Your previous answer is not acceptable.") {
					t.Errorf("corrective user content = %q", got)
				}
				if len(second.Format) == 0 || second.Format[0] != '{' {
					t.Errorf("format = %s, want the schema object", second.Format)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.replies...)
			res, err := tt.call(t.Context(), newService(t, f))
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			if res.Attempts != 2 {
				t.Errorf("Attempts = %d, want 2", res.Attempts)
			}
			bodies := f.requests()
			if len(bodies) != 2 {
				t.Fatalf("upstream saw %d requests, want 2", len(bodies))
			}
			for i, b := range bodies {
				checkGolden(t, fmt.Sprintf("%s.attempt%d", tt.name, i+1), b)
			}
			tt.check(t, res, decodeBody(t, bodies[1]))
		})
	}
}
