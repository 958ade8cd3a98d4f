package sampler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a fake provider that answers from a list of canned replies and
// records what it was sent.
type script struct {
	name    string
	mu      sync.Mutex
	replies []func(*Request) (*Response, error)
	got     []Request
}

func (s *script) Name() string { return s.name }

func (s *script) Sample(ctx context.Context, req *Request) (*Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, *req)
	if len(s.replies) == 0 {
		return nil, errors.New("script: no reply left")
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r(req)
}

func text(s string) func(*Request) (*Response, error) {
	return func(*Request) (*Response, error) {
		return &Response{Model: "m1", Content: []Content{TextBlock(s)}, StopReason: StopEndTurn, Usage: Usage{InputTokens: 3, OutputTokens: 2}}, nil
	}
}

func call(name, args string) func(*Request) (*Response, error) {
	return func(*Request) (*Response, error) {
		return &Response{Model: "m1", Content: []Content{{Type: BlockToolUse, ID: "call_" + name, Name: name, Input: json.RawMessage(args)}}, StopReason: StopToolUse}, nil
	}
}

func fail(status int) func(*Request) (*Response, error) {
	return func(*Request) (*Response, error) {
		return nil, &UpstreamError{Provider: "p", Status: status}
	}
}

type fixture struct {
	svc  *Service
	obs  *recorder
	p, q *script
}

// recorder is an Observer that counts what it is told, by a line naming it.
type recorder struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *recorder) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[line]++
}

func (r *recorder) UpstreamRetry(provider, reason string) { r.add("retry " + provider + " " + reason) }
func (r *recorder) AnswerInvalid(method, kind string, retried bool) {
	r.add("invalid " + method + " " + kind)
	if retried {
		r.add("corrected " + method)
	}
}
func (r *recorder) Retried(method string, u Usage) {
	r.add(fmt.Sprintf("wasted %s %d %d", method, u.InputTokens, u.OutputTokens))
}
func (r *recorder) Exhausted(method string)  { r.add("exhausted " + method) }
func (r *recorder) Overhead(d time.Duration) { r.add("overhead") }
func (r *recorder) Sampled(caller, mode, modelID, outcome string) {
	r.add("sampled " + caller + " " + mode + " " + modelID + " " + outcome)
}

func (r *recorder) check(t *testing.T, line string, want int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := r.n[line]; got != want {
		t.Errorf("%q observed %d times, want %d", line, got, want)
	}
}

func newFixture(t *testing.T, replies ...func(*Request) (*Response, error)) *fixture {
	t.Helper()
	f := &fixture{obs: &recorder{n: map[string]int{}}, p: &script{name: "p", replies: replies}, q: &script{name: "q"}}
	cat := NewCatalog([]Model{
		{Provider: "p", Name: "m1", Fallbacks: []string{"q/m2"}},
		{Provider: "q", Name: "m2"},
	}, "p/m1")
	var err error
	f.svc, err = New(Options{Providers: []Provider{f.p, f.q}, Catalog: cat, Observer: f.obs,
		Upstream: retry.Upstream{Rand: func() float64 { return 0 }}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func userText(s string) []Message {
	return []Message{{Role: RoleUser, Content: []Content{TextBlock(s)}}}
}

const personSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name","age"],"additionalProperties":false}`

const weatherTool = `{"name":"get_weather","description":"Get the weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`

func tools(t *testing.T, defs ...string) []Tool {
	t.Helper()
	out := make([]Tool, len(defs))
	for i, d := range defs {
		if err := json.Unmarshal([]byte(d), &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestRequestChecks(t *testing.T) {
	tu := Content{Type: BlockToolUse, ID: "c1", Name: "get_weather", Input: json.RawMessage(`{}`)}
	tr := Content{Type: BlockToolResult, ToolUseID: "c1", Content: []Content{TextBlock("ok")}}
	tests := []struct {
		name     string
		p        Params
		wantPath string
	}{
		{name: "no messages", p: Params{Request: Request{MaxTokens: 10}}, wantPath: "/messages"},
		{name: "maxTokens zero", p: Params{Request: Request{Messages: userText("hi")}}, wantPath: "/maxTokens"},
		{name: "maxTokens negative", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: -1}}, wantPath: "/maxTokens"},
		{name: "schema and tools", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: 10, Schema: json.RawMessage(personSchema), Tools: tools(t, weatherTool)}}, wantPath: "/tools"},
		{name: "invalid schema type", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: 10, Schema: json.RawMessage(`{"type":"strin"}`)}}, wantPath: "/schema/type"},
		{name: "invalid nested schema", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: 10, Schema: json.RawMessage(`{"type":"object","properties":{"a":{"minLength":-1}}}`)}}, wantPath: "/schema/properties/a/minLength"},
		{name: "schema with remote ref", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: 10, Schema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}}, wantPath: "/schema"},
		{name: "unknown model", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: 10}, ModelSpec: "nope/x"}, wantPath: "/model"},
		{name: "tool_result mixed with text", p: Params{Request: Request{MaxTokens: 10, Messages: []Message{
			{Role: RoleUser, Content: []Content{TextBlock("weather?")}},
			{Role: RoleAssistant, Content: []Content{tu}},
			{Role: RoleUser, Content: []Content{tr, TextBlock("and also")}},
		}}}, wantPath: "/messages/2/content"},
		{name: "tool_use not answered", p: Params{Request: Request{MaxTokens: 10, Messages: []Message{
			{Role: RoleUser, Content: []Content{TextBlock("weather?")}},
			{Role: RoleAssistant, Content: []Content{tu}},
			{Role: RoleUser, Content: []Content{TextBlock("never mind")}},
		}}}, wantPath: "/messages/1/content/0"},
		{name: "tool_result answers nothing", p: Params{Request: Request{MaxTokens: 10, Messages: []Message{
			{Role: RoleUser, Content: []Content{tr}},
		}}}, wantPath: "/messages/0/content/0/toolUseId"},
		{name: "bad role", p: Params{Request: Request{MaxTokens: 10, Messages: []Message{{Role: "system", Content: []Content{TextBlock("x")}}}}}, wantPath: "/messages/0/role"},
		{name: "forced unknown tool", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: 10, Tools: tools(t, weatherTool), ToolChoice: &ToolChoice{Mode: "tool", Name: "nope"}}}, wantPath: "/toolChoice/name"},
		{name: "image data not base64", p: Params{Request: Request{MaxTokens: 10, Messages: []Message{
			{Role: RoleUser, Content: []Content{{Type: BlockImage, Data: "not base64!", MIMEType: "image/png"}}},
		}}}, wantPath: "/messages/0/content/0/data"},
		{name: "audio with an image media type", p: Params{Request: Request{MaxTokens: 10, Messages: []Message{
			{Role: RoleUser, Content: []Content{{Type: BlockAudio, Data: "UklGRg==", MIMEType: "image/png"}}},
		}}}, wantPath: "/messages/0/content/0/mimeType"},
		{name: "tool schema not an object", p: Params{Request: Request{Messages: userText("hi"), MaxTokens: 10, Tools: tools(t, `{"name":"x","inputSchema":{"type":"string"}}`)}}, wantPath: "/tools/0/inputSchema/type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, text("unused"))
			_, err := f.svc.Sample(context.Background(), &tt.p)
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("err = %v, want *InvalidError", err)
			}
			var paths []string
			for _, e := range inv.Errors {
				paths = append(paths, e.Path)
			}
			if !strings.Contains(strings.Join(paths, " "), tt.wantPath) {
				t.Errorf("paths %v do not name %s", paths, tt.wantPath)
			}
			if len(f.p.got) != 0 {
				t.Error("the provider was called for an invalid request")
			}
		})
	}
}

func TestSampleSchemaSingleAttempt(t *testing.T) {
	f := newFixture(t, text("```json\n{\"name\":\"Ada\",\"age\":-1}\n```"))
	res, err := f.svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("who?"), MaxTokens: 50, Schema: json.RawMessage(personSchema)}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Parsed) != "null" || res.ParseError == nil {
		t.Fatalf("parsed = %s, parseError = %+v; want null and an error", res.Parsed, res.ParseError)
	}
	if diff := cmp.Diff([]FieldError{{Path: "/age", Message: res.ParseError.Errors[0].Message}}, res.ParseError.Errors); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(f.p.got) != 1 {
		t.Errorf("provider called %d times, want 1 (no retry in /v1/sample)", len(f.p.got))
	}
}

func TestSampleSchemaRetriesWithFeedback(t *testing.T) {
	f := newFixture(t, text(`{"name":"Ada"`), text(`{"name":"Ada","age":-3}`), text(`{"name":"Ada","age":36}`))
	res, err := f.svc.SampleSchema(context.Background(), &Params{Request: Request{Messages: userText("who?"), MaxTokens: 50, Schema: json.RawMessage(personSchema)}, Caller: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"name":"Ada","age":36}`, string(res.Parsed)); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	if res.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", res.Attempts)
	}
	if got := len(f.p.got[2].Messages); got != 5 {
		t.Fatalf("third attempt sent %d messages, want 5 (question + 2 × (answer, correction))", got)
	}
	last := f.p.got[2].Messages[4]
	if last.Role != RoleUser || !strings.Contains(TextOf(last.Content), "/age") {
		t.Errorf("corrective turn %q does not name /age", TextOf(last.Content))
	}
	if got := TextOf(f.p.got[2].Messages[3].Content); got != `{"name":"Ada","age":-3}` {
		t.Errorf("failed answer not replayed: %q", got)
	}
	f.obs.check(t, "invalid sampleSchema "+KindInvalidJSON, 1)
	f.obs.check(t, "invalid sampleSchema "+KindSchemaMismatch, 1)
	f.obs.check(t, "corrected sampleSchema", 2)
	f.obs.check(t, "wasted sampleSchema 3 2", 2) // each failed answer's own usage
	f.obs.check(t, "exhausted sampleSchema", 0)
	f.obs.check(t, "overhead", 1)
	f.obs.check(t, "sampled test schema p/m1 ok", 1)
}

func TestSampleToolsExhausted(t *testing.T) {
	f := newFixture(t, text("I'd rather not"), call("get_wether", `{"city":"Paris"}`), call("get_weather", `{"town":"Paris"}`))
	_, err := f.svc.SampleTools(context.Background(), &Params{Request: Request{Messages: userText("weather in Paris?"), MaxTokens: 50, Tools: tools(t, weatherTool)}})
	var ex *ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("err = %v, want *ExhaustedError", err)
	}
	if ex.Method != MethodTools || ex.Attempts != 3 || ex.LastResult == nil || ex.LastResult.ToolCalls[0].Name != "get_weather" {
		t.Errorf("exhausted = %+v", ex)
	}
	if ex.Errors[0].Path != "/toolCalls/0/arguments" {
		t.Errorf("errors = %+v, want one at /toolCalls/0/arguments", ex.Errors)
	}
	if f.p.got[0].ToolChoice.EffectiveMode() != ToolChoiceRequired {
		t.Errorf("toolChoice = %+v, want required by default", f.p.got[0].ToolChoice)
	}
	// The unknown tool call of attempt 2 is answered by an error tool_result.
	corr := f.p.got[2].Messages[4]
	if len(corr.Content) != 1 || corr.Content[0].Type != BlockToolResult || corr.Content[0].ToolUseID != "call_get_wether" || !*corr.Content[0].IsError {
		t.Fatalf("correction = %+v, want one error tool_result", corr)
	}
	if !strings.Contains(TextOf(corr.Content[0].Content), "unknown tool") {
		t.Errorf("correction text %q does not say unknown tool", TextOf(corr.Content[0].Content))
	}
	for _, kind := range []string{KindNoToolCall, KindUnknownTool, KindInvalidArguments} {
		f.obs.check(t, "invalid sampleTools "+kind, 1)
	}
	f.obs.check(t, "corrected sampleTools", 2)
	// Each failed answer's own usage; the last one is not retried.
	f.obs.check(t, "wasted sampleTools 3 2", 1)
	f.obs.check(t, "wasted sampleTools 0 0", 1)
	f.obs.check(t, "exhausted sampleTools", 1)
	f.obs.check(t, "sampled  tools p/m1 exhausted", 1)
	// Every request the helper sent obeys MCP's message rules.
	for i, r := range f.p.got {
		if errs := checkRequest(&Params{Request: r}, f.svc.schemas); errs != nil {
			t.Errorf("attempt %d sent an invalid conversation: %v", i+1, errs)
		}
	}
}

func TestRetriesBounds(t *testing.T) {
	f := newFixture(t)
	_, err := f.svc.SampleSchema(context.Background(), &Params{Request: Request{Messages: userText("x"), MaxTokens: 5, Schema: json.RawMessage(personSchema)}, Retries: ptr(11)})
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Errors[0].Path != "/retries" {
		t.Fatalf("err = %v, want an error at /retries", err)
	}
}

func TestUpstreamRetryThenFallback(t *testing.T) {
	f := newFixture(t, fail(503), text("hello"))
	res, err := f.svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("hi"), MaxTokens: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Provider != "p" || len(f.p.got) != 2 {
		t.Errorf("provider %s after %d calls; want p after 2", res.Provider, len(f.p.got))
	}
	f.obs.check(t, "retry p server_error", 1)

	f = newFixture(t, fail(500), fail(502), fail(503))
	f.q.replies = append(f.q.replies, text("from q"))
	res, err = f.svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("hi"), MaxTokens: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Provider != "q" || res.Text != "from q" || f.q.got[0].Model != "m2" {
		t.Errorf("answered by %s/%s %q; want the fallback q/m2", res.Provider, res.Model, res.Text)
	}

	f = newFixture(t, fail(400))
	_, err = f.svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("hi"), MaxTokens: 5}})
	var up *UpstreamError
	if !errors.As(err, &up) || up.Status != 400 || len(f.p.got) != 1 || len(f.q.got) != 0 {
		t.Errorf("err = %v after %d+%d calls; want the 400 after one call, no fallback", err, len(f.p.got), len(f.q.got))
	}
}

// TestLongRetryAfterFailsAtOnce: an upstream asking for a longer wait than
// the retry policy allows, or than the request has left, is not waited
// for: the 503 and its Retry-After reach the caller at once.
func TestLongRetryAfterFailsAtOnce(t *testing.T) {
	unavailable := func(after time.Duration) func(*Request) (*Response, error) {
		return func(*Request) (*Response, error) {
			return nil, &UpstreamError{Provider: "p", Status: 503, RetryAfter: after}
		}
	}
	tests := []struct {
		name           string
		after          time.Duration
		requestTimeout time.Duration
	}{
		{"longer than the policy's cap", time.Hour, time.Hour},
		{"longer than the request has left", 20 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &script{name: "p", replies: []func(*Request) (*Response, error){unavailable(tt.after), text("late")}}
			svc, err := New(Options{Providers: []Provider{p}, Catalog: NewCatalog([]Model{{Provider: "p", Name: "m1"}}, ""),
				RequestTimeout: tt.requestTimeout})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("hi"), MaxTokens: 5}})
			var up *UpstreamError
			if !errors.As(err, &up) || up.Status != 503 || up.RetryAfter != tt.after {
				t.Fatalf("err = %v, want the 503 with its Retry-After", err)
			}
			if len(p.got) != 1 || time.Since(start) > time.Second {
				t.Errorf("%d calls in %s; want one call and no wait", len(p.got), time.Since(start))
			}
		})
	}
}

// hang is a provider whose calls wait until their context ends.
type hang struct {
	name  string
	calls atomic.Int32
}

func (h *hang) Name() string { return h.name }

func (h *hang) Sample(ctx context.Context, _ *Request) (*Response, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return nil, &UpstreamError{Provider: h.name, Timeout: true, Message: "no answer", Err: ctx.Err()}
}

// TestDeadlines: a call that outlasts the per-call timeout is an upstream
// timeout, retried and then given to the fallback; one that outlasts the
// request's deadline ends the request: no retry, no fallback.
func TestDeadlines(t *testing.T) {
	tests := []struct {
		name          string
		call, request time.Duration
		wantP, wantQ  int32
	}{
		{"per-call timeout", 20 * time.Millisecond, time.Hour, 3, 3},
		{"request deadline", time.Hour, 50 * time.Millisecond, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, q := &hang{name: "p"}, &hang{name: "q"}
			cat := NewCatalog([]Model{{Provider: "p", Name: "m1", Fallbacks: []string{"q/m2"}}, {Provider: "q", Name: "m2"}}, "p/m1")
			svc, err := New(Options{Providers: []Provider{p, q}, Catalog: cat, CallTimeout: tt.call, RequestTimeout: tt.request,
				Upstream: retry.Upstream{Rand: func() float64 { return 0 }}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = svc.Sample(t.Context(), &Params{Request: Request{Messages: userText("hi"), MaxTokens: 5}})
			var up *UpstreamError
			if !errors.As(err, &up) || !up.Timeout {
				t.Errorf("err = %v, want an upstream timeout", err)
			}
			if p.calls.Load() != tt.wantP || q.calls.Load() != tt.wantQ {
				t.Errorf("calls p %d, q %d; want %d, %d", p.calls.Load(), q.calls.Load(), tt.wantP, tt.wantQ)
			}
		})
	}
}
