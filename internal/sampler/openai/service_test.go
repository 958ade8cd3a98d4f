package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// newService returns a Service whose one model, openai/gpt-4o, is served
// by p, and whose upstream retries wait zero time.
func newService(t *testing.T, p *Provider) *sampler.Service {
	t.Helper()
	cat := sampler.NewCatalog([]sampler.Model{{Provider: p.Name(), Name: "gpt-4o"}}, "")
	svc, err := sampler.New(sampler.Options{Providers: []sampler.Provider{p}, Catalog: cat,
		Upstream: retry.Upstream{Rand: func() float64 { return 0 }}})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestServiceRetriesServerError drives a 500 and then a success through
// the Service: the provider does not retry, the Service does.
func TestServiceRetriesServerError(t *testing.T) {
	f := newFake(t,
		reply{status: http.StatusInternalServerError, file: "errors/server_error.json"},
		reply{file: "replies/text.json"},
	)
	svc := newService(t, New(Options{BaseURL: f.srv.URL, APIKey: testKey}))
	res, err := svc.Sample(context.Background(), &sampler.Params{Request: sampler.Request{
		Messages: []sampler.Message{userText("Hello!")}, MaxTokens: 64}})
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	if got, want := res.Text, "Hello! How can I assist you today?"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	bodies := f.bodies()
	if len(bodies) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(bodies))
	}
	if diff := cmp.Diff(string(bodies[0]), string(bodies[1])); diff != "" {
		t.Errorf("the retry sent another body (-first +retry):\n%s", diff)
	}
}

// TestSampleToolsCorrection runs the guaranteed tools helper against a
// model that first calls the tool with arguments its inputSchema rejects.
// The golden second request holds the failed assistant tool_calls message
// and a tool message with the corrective text for the call.
func TestSampleToolsCorrection(t *testing.T) {
	f := newFake(t, reply{file: "replies/tool_call_invalid.json"}, reply{file: "replies/tool_call.json"})
	svc := newService(t, New(Options{BaseURL: f.srv.URL, APIKey: testKey}))
	res, err := svc.SampleTools(context.Background(), &sampler.Params{Request: sampler.Request{
		Messages:  []sampler.Message{userText("What's the weather like in Boston today?")},
		MaxTokens: 256,
		Tools:     []sampler.Tool{weatherTool()},
	}})
	if err != nil {
		t.Fatalf("SampleTools: %v", err)
	}
	want := []sampler.ToolCall{{ID: "call_abc123", Name: "get_current_weather", Arguments: json.RawMessage(`{"location":"Boston, MA"}`)}}
	if diff := cmp.Diff(want, res.ToolCalls); diff != "" {
		t.Errorf("ToolCalls (-want +got):\n%s", diff)
	}
	if res.Attempts != 2 {
		t.Errorf("Attempts = %d, want 2", res.Attempts)
	}
	if n := len(f.bodies()); n != 2 {
		t.Fatalf("upstream got %d requests, want 2", n)
	}
	checkGolden(t, "sample_tools_correction", f.last(t))
}

// TestSampleSchemaCorrection runs the guaranteed schema helper against a
// model that first answers in prose. The golden second request holds the
// failed answer and the corrective user message.
func TestSampleSchemaCorrection(t *testing.T) {
	f := newFake(t, reply{file: "replies/schema_invalid.json"}, reply{file: "replies/schema.json"})
	svc := newService(t, New(Options{BaseURL: f.srv.URL, APIKey: testKey}))
	res, err := svc.SampleSchema(context.Background(), &sampler.Params{Request: sampler.Request{
		SystemPrompt: "Extract the event information.",
		Messages:     []sampler.Message{userText("Alice and Bob are going to a science fair on Friday.")},
		MaxTokens:    256,
		Schema:       json.RawMessage(eventSchema),
	}})
	if err != nil {
		t.Fatalf("SampleSchema: %v", err)
	}
	if diff := cmp.Diff(`{"name":"Science Fair","date":"Friday","participants":["Alice","Bob"]}`, string(res.Parsed)); diff != "" {
		t.Errorf("Parsed (-want +got):\n%s", diff)
	}
	if res.Attempts != 2 {
		t.Errorf("Attempts = %d, want 2", res.Attempts)
	}
	if n := len(f.bodies()); n != 2 {
		t.Fatalf("upstream got %d requests, want 2", n)
	}
	checkGolden(t, "sample_schema_correction", f.last(t))
}
