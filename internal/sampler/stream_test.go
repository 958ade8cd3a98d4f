package sampler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/retry"
)

// streaming is a fake Streamer: each call emits its fragments, then
// answers whole or fails as its script says.
type streaming struct {
	calls  int
	frags  [][]string // fragments of each call
	fail   []error    // the error ending each call, nil for none
	hangAt int        // the call that falls silent after its fragments (1-based), 0 for none
}

func (s *streaming) Name() string { return "p" }

func (s *streaming) Sample(ctx context.Context, req *Request) (*Response, error) {
	return s.Stream(ctx, req, func(Delta) {})
}

func (s *streaming) Stream(ctx context.Context, _ *Request, emit func(Delta)) (*Response, error) {
	i := s.calls
	s.calls++
	for _, f := range s.frags[i] {
		emit(Delta{Text: f})
	}
	if s.hangAt == i+1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if i < len(s.fail) && s.fail[i] != nil {
		return nil, s.fail[i]
	}
	return &Response{Content: []Content{TextBlock(strings.Join(s.frags[i], ""))}, StopReason: StopEndTurn}, nil
}

func streamService(t *testing.T, p Provider, idle time.Duration) *Service {
	t.Helper()
	svc, err := New(Options{Providers: []Provider{p}, Catalog: NewCatalog([]Model{{Provider: "p", Name: "m1"}}, "p/m1"),
		Upstream: retry.Upstream{Rand: func() float64 { return 0 }}, IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestStreamDeltas: a streamed request hands over every fragment, tagged
// with its attempt; a guaranteed helper's retry is announced between two
// attempts' fragments, and the fragments of each attempt make its answer.
func TestStreamDeltas(t *testing.T) {
	p := &streaming{frags: [][]string{{`{"name":`, `"Ada"`}, {`{"name":"Ada",`, `"age":36}`}}}
	svc := streamService(t, p, 0)
	var got []string
	params := &Params{Request: Request{Messages: userText("who?"), MaxTokens: 50, Schema: json.RawMessage(personSchema)},
		OnDelta: func(d Delta) { got = append(got, string(rune('0'+d.Attempt))+" "+d.Text) },
		OnRetry: func(a int, errs []FieldError) { got = append(got, "retry "+string(rune('0'+a))) }}
	res, err := svc.SampleSchema(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`1 {"name":`, `1 "Ada"`, "retry 2", `2 {"name":"Ada",`, `2 "age":36}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if string(res.Parsed) != `{"name":"Ada","age":36}` || res.Attempts != 2 {
		t.Errorf("parsed %s after %d attempts", res.Parsed, res.Attempts)
	}
}

// TestStreamWholeAnswer: a provider that does not stream is asked whole,
// and its answer reaches the caller as one delta a block or call.
func TestStreamWholeAnswer(t *testing.T) {
	f := newFixture(t, call("get_weather", `{"city":"Oslo"}`))
	var got []Delta
	_, err := f.svc.SampleTools(context.Background(), &Params{Request: Request{Messages: userText("weather?"), MaxTokens: 50, Tools: tools(t, weatherTool)},
		OnDelta: func(d Delta) { got = append(got, d) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{{Attempt: 1, ToolCall: &ToolCallDelta{ID: "call_get_weather", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
}

// TestStreamBrokenNotRetried: a stream that fails before its first
// fragment is retried like any call; one that fails after it is not, since
// the caller cannot take the fragment back.
func TestStreamBrokenNotRetried(t *testing.T) {
	p := &streaming{frags: [][]string{nil, {"hel"}, {"hello"}},
		fail: []error{&UpstreamError{Provider: "p", Status: 503}, &UpstreamError{Provider: "p", Status: 0, Message: "reset"}}}
	svc := streamService(t, p, 0)
	var got string
	_, err := svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("hi"), MaxTokens: 5},
		OnDelta: func(d Delta) { got += d.Text }})
	var up *UpstreamError
	if !errors.As(err, &up) || !up.Partial || up.Retryable() {
		t.Fatalf("err = %#v; want a partial, unretryable upstream error", err)
	}
	if p.calls != 2 || got != "hel" {
		t.Errorf("%d calls, streamed %q; want 2 calls (the 503 retried, the broken stream not) and \"hel\"", p.calls, got)
	}
}

// TestStreamIdle: a provider that falls silent mid-stream is cut off
// after the idle timeout, as an upstream timeout.
func TestStreamIdle(t *testing.T) {
	p := &streaming{frags: [][]string{{"a", "b"}}, hangAt: 1}
	svc := streamService(t, p, 50*time.Millisecond)
	_, err := svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("hi"), MaxTokens: 5},
		OnDelta: func(Delta) {}})
	var up *UpstreamError
	if !errors.As(err, &up) || !up.Timeout || !strings.Contains(up.Message, "50ms") {
		t.Fatalf("err = %v; want an upstream timeout naming the idle timeout", err)
	}
}
