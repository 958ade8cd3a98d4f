package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/host"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/openai"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/testwait"
	"github.com/sampled/sampled/internal/tools"
)

// snapshotOf reads a run's snapshot from the store.
func (s *stack) snapshotOf(t testing.TB, id string) loop.Snapshot {
	t.Helper()
	b, err := s.store.Snapshot(context.Background(), id)
	if err != nil {
		t.Fatalf("snapshot %s: %v", id, err)
	}
	var snap loop.Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// loopMeta is the result's _meta naming the client-run loop.
func loopMeta(t testing.TB, res sampler.CreateMessageResult) (id string, iterations int, origin host.Origin) {
	t.Helper()
	var meta map[string]struct {
		ID         string      `json:"id"`
		TraceID    string      `json:"traceId"`
		Iterations int         `json:"iterations"`
		Origin     host.Origin `json:"origin"`
	}
	if err := json.Unmarshal(res.Meta, &meta); err != nil {
		t.Fatalf("_meta %s: %v", res.Meta, err)
	}
	m, ok := meta[host.MetaLoop]
	if !ok || !strings.HasPrefix(m.ID, "loop_") || m.TraceID == "" {
		t.Fatalf("_meta %s does not name the loop", res.Meta)
	}
	return m.ID, m.Iterations, m.Origin
}

// TestClientRunLoop: a server asks sampled to run the loop. It reaches only
// the tools matching both its allowedToolPatterns and its policy, never its
// own; the answer is the loop's final text; the loop is a run in the store;
// progress is sent per iteration.
func TestClientRunLoop(t *testing.T) {
	t.Parallel()
	policy := host.Policy{Loop: true, LoopTools: tools.Patterns{"std__*", "peer__*"}, LoopMaxIterations: 4}
	s := newStack(t, map[string]peerConfig{"peer": stdioPeer(t, "", policy)}, stackOptions{})
	out := s.sample(t, "peer", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"Please calculate 2 * (3 + 4)"}}],
		"maxTokens":300,"_meta":{"progressToken":"loop-1","maxIterations":9,"allowedToolPatterns":["std__calc*","std__now","peer__*"]}}`)
	res := checkResult(t, out)
	if len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, "14") || res.StopReason != sampler.StopEndTurn {
		t.Errorf("result %s, want the loop's answer with 14", out.Result)
	}
	id, iterations, origin := loopMeta(t, res)
	if origin.Server != "peer" || origin.RequestID == "" {
		t.Errorf("origin %+v, want the peer and its request's JSON-RPC id", origin)
	}
	snap := s.snapshotOf(t, id)
	if snap.Status != loop.StatusCompleted || snap.Iterations != iterations || iterations != 2 || snap.MaxIterations != 4 {
		t.Errorf("run %s: status %s, %d iterations (meta %d), maxIterations %d; want completed in 2, capped at 4",
			id, snap.Status, snap.Iterations, iterations, snap.MaxIterations)
	}
	if diff := cmp.Diff([]string{"std__calculate", "std__now"}, snap.Tools); diff != "" {
		t.Errorf("the loop's tools (-want +got):\n%s", diff)
	}
	if want := (loop.Origin{Kind: loop.OriginMCP, Server: "peer", RequestID: origin.RequestID}); snap.Origin != want {
		t.Errorf("run origin %+v, want %+v", snap.Origin, want)
	}
	if snap.Result != res.Content[0].Text {
		t.Errorf("run result %q, answer %q", snap.Result, res.Content[0].Text)
	}

	want := []string{"client-run loop: iteration 1 of at most 4", "client-run loop: iteration 2 of at most 4"}
	if diff := cmp.Diff(want, s.progressSeen(t, "peer", "loop-1")); diff != "" {
		t.Errorf("progress the server saw (-want +got):\n%s", diff)
	}

	// Patterns that reach nothing the policy allows are refused.
	out = s.sample(t, "peer", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5,
		"_meta":{"maxIterations":2,"allowedToolPatterns":["peer__*","git__*"]}}`)
	if out.Code != tools.CodeRefused || !strings.Contains(out.Message, "no tool of sampled matches") {
		t.Errorf("patterns matching only the server's own tools: %d %q, want -1", out.Code, out.Message)
	}
}

// TestLoopNotAllowed: a loop needs the policy's consent.
func TestLoopNotAllowed(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]peerConfig{"peer": stdioPeer(t, "", host.Policy{})}, stackOptions{})
	out := s.sample(t, "peer", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5,
		"_meta":{"maxIterations":2,"allowedToolPatterns":["std__*"]}}`)
	if out.Code != tools.CodeRefused || !strings.Contains(out.Message, "may not ask for a client-run loop") {
		t.Errorf("%d %q, want -1", out.Code, out.Message)
	}
}

// TestNestingDepth: servers a and b each ask for a client-run loop over
// the other's nest tool. a's request is depth 1; its loop calls b__nest,
// whose request is depth 2; that loop calls a__nest (depth 3), whose loop
// calls b__nest again: depth 4 is refused with -1, and the loops above it
// finish.
func TestNestingDepth(t *testing.T) {
	t.Parallel()
	policy := host.Policy{Loop: true, LoopTools: tools.Patterns{"*__nest"}}
	s := newStack(t, map[string]peerConfig{"a": stdioPeer(t, "", policy), "b": stdioPeer(t, "", policy)}, stackOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	out := s.call(t, ctx, "a__nest", map[string]any{})
	res := checkResult(t, out)
	if _, it, _ := loopMeta(t, res); it < 1 {
		t.Errorf("the outer loop ran %d iterations", it)
	}
	for _, tc := range []struct {
		server, outcome string
		want            float64
	}{{"a", "ok", 2}, {"b", "ok", 1}, {"b", "refused", 1}, {"a", "refused", 0}} {
		if got := testutil.ToFloat64(s.metrics.MCPSampling.WithLabelValues(tc.server, tc.outcome)); got != tc.want {
			t.Errorf("sampling requests {%s, %s} = %v, want %v", tc.server, tc.outcome, got, tc.want)
		}
	}
	// The deepest loop saw the refusal as its tool's error result.
	found := false
	for _, id := range s.runIDs(t) {
		for _, m := range s.snapshotOf(t, id).Messages {
			for _, c := range m.Content {
				for _, r := range c.Content {
					found = found || strings.Contains(r.Text, "nested sampling too deep: this request is at depth 4, the limit is 3")
				}
			}
		}
	}
	if !found {
		t.Error("no loop saw the depth refusal")
	}
}

// runIDs lists the runs the stack's host started.
func (s *stack) runIDs(t testing.TB) []string {
	t.Helper()
	s.loops.mu.Lock()
	defer s.loops.mu.Unlock()
	return append([]string(nil), s.loops.ids...)
}

// fakeUpstream is an OpenAI-compatible upstream that holds every request
// until its client goes away, telling when each arrives and ends; or fails
// at once with status.
type fakeUpstream struct {
	status   int
	received chan struct{}
	gone     chan struct{}
}

func newFakeUpstream(t testing.TB, status int) (*fakeUpstream, *httptest.Server) {
	f := &fakeUpstream{status: status, received: make(chan struct{}, 8), gone: make(chan struct{}, 8)}
	stop := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			_, _ = w.Write([]byte(`{"error":{"message":"the fake refuses","type":"invalid_request_error"}}`))
			return
		}
		// Read the body, so that net/http notices the client going away.
		_, _ = io.Copy(io.Discard, r.Body)
		f.received <- struct{}{}
		select {
		case <-r.Context().Done():
			f.gone <- struct{}{}
		case <-stop:
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(stop) }) // runs first
	return f, ts
}

func fakeOptions(ts *httptest.Server) stackOptions {
	return stackOptions{
		providers: []sampler.Provider{openai.New(openai.Options{Name: "fake", BaseURL: ts.URL})},
		models:    []sampler.Model{{Provider: "fake", Name: "m"}},
	}
}

// TestCancellation: the server's sampling request is cancelled (its tool
// call is, so go-sdk sends notifications/cancelled): sampled cancels the
// upstream call, which the fake upstream sees.
func TestCancellation(t *testing.T) {
	t.Parallel()
	f, ts := newFakeUpstream(t, 0)
	srv := stdioPeer(t, "", host.Policy{Models: []string{"fake/m"}})
	s := newStack(t, map[string]peerConfig{"peer": srv}, fakeOptions(ts))
	marker := filepath.Join(t.TempDir(), "marker")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(map[string]string{"marker": marker})
		_, err := s.reg.Call(ctx, "peer__slow_sample", b)
		done <- err
	}()
	select {
	case <-f.received:
	case <-time.After(waitTimeout):
		t.Fatal("the upstream never got the request")
	}
	cancel()
	select {
	case <-f.gone:
	case <-time.After(waitTimeout):
		m, _ := os.ReadFile(marker)
		t.Fatalf("the upstream request was not cancelled (marker %q)", m)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the tool call ended with %v, want cancelled", err)
	}
	mcptest.PollFile(t, marker, "cancelled", waitTimeout)
	waitCount(t, s, "peer", "cancelled")
}

// waitCount waits until a sampling outcome of server was counted: the
// handler ends after the server saw its request cancelled.
func waitCount(t testing.TB, s *stack, server, outcome string) {
	t.Helper()
	testwait.Poll(t, 5*time.Millisecond, waitTimeout, "a "+outcome+" request of "+server+" counted", func() bool {
		return testutil.ToFloat64(s.metrics.MCPSampling.WithLabelValues(server, outcome)) == 1
	})
}

// TestUpstreamFailure: a model call that fails is a JSON-RPC error -32603
// with a clear message.
func TestUpstreamFailure(t *testing.T) {
	t.Parallel()
	_, ts := newFakeUpstream(t, http.StatusBadRequest)
	srv := stdioPeer(t, "", host.Policy{Models: []string{"fake/m"}})
	s := newStack(t, map[string]peerConfig{"peer": srv}, fakeOptions(ts))
	out := s.sample(t, "peer", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5}`)
	if out.Code != tools.CodeInternal || !strings.Contains(out.Message, "the model call failed") || !strings.Contains(out.Message, "fake") {
		t.Errorf("%d %q, want -32603 saying the model call to fake failed", out.Code, out.Message)
	}
	if got := testutil.ToFloat64(s.metrics.MCPSampling.WithLabelValues("peer", "error")); got != 1 {
		t.Errorf("sampling requests {peer, error} = %v, want 1", got)
	}
}

// TestInFlightCap: the servers' sampling requests take places of the
// service's cap on sampling requests in flight (limits.inFlightSamples),
// the one HTTP sampling takes from. While a request of one server holds
// the only place, another server's request is refused with -1 naming the
// cap; once it ends, its place is given back and requests are answered.
func TestInFlightCap(t *testing.T) {
	t.Parallel()
	guard, err := access.New(access.Options{InFlightSamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, ts := newFakeUpstream(t, 0)
	so := fakeOptions(ts)
	so.inFlight = guard
	s := newStack(t, map[string]peerConfig{
		"slow":  stdioPeer(t, "", host.Policy{Models: []string{"fake/m"}}),
		"plain": stdioPeer(t, "", host.Policy{}),
	}, so)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(map[string]string{"marker": filepath.Join(t.TempDir(), "marker")})
		_, err := s.reg.Call(ctx, "slow__slow_sample", b)
		done <- err
	}()
	select {
	case <-f.received:
	case <-time.After(waitTimeout):
		t.Fatal("the upstream never got the request")
	}
	if n := guard.InFlight(); n != 1 {
		t.Errorf("in flight while the upstream holds the request: %d, want 1", n)
	}
	const hello = `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello"}}],"maxTokens":50}`
	out := s.sample(t, "plain", "push", hello)
	if out.Code != tools.CodeRefused || !strings.Contains(out.Message, "limits.inFlightSamples") {
		t.Errorf("a request over the cap: %d %q, want -1 naming limits.inFlightSamples", out.Code, out.Message)
	}
	cancel()
	<-done
	waitCount(t, s, "slow", "cancelled")
	if n := guard.InFlight(); n != 0 {
		t.Errorf("in flight after the request ended: %d, want 0", n)
	}
	checkResult(t, s.sample(t, "plain", "push", hello))
	if n := guard.InFlight(); n != 0 {
		t.Errorf("in flight after an answered request: %d, want 0", n)
	}
	if got := testutil.ToFloat64(s.metrics.MCPSampling.WithLabelValues("plain", "refused")); got != 1 {
		t.Errorf("sampling requests {plain, refused} = %v, want 1", got)
	}
}

// TestMaxTokensCap: a server's maxTokens is lowered to the service's cap
// (SAMPLED_MAX_TOKENS) when its policy sets none or a higher one.
func TestMaxTokensCap(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]peerConfig{
		"open":   stdioPeer(t, "", host.Policy{}),
		"capped": stdioPeer(t, "", host.Policy{MaxTokens: 1000}),
	}, stackOptions{maxTokens: 3})
	for _, server := range []string{"open", "capped"} {
		res := checkResult(t, s.sample(t, server, "push", `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello to the whole wide world"}}],"maxTokens":100000}`))
		if n := len(strings.Fields(res.Content[0].Text)); n > 3 || res.StopReason != sampler.StopMaxTokens {
			t.Errorf("%s: answer %q (%s) has %d words, want it cut at the cap of 3 tokens", server, res.Content[0].Text, res.StopReason, n)
		}
	}
}
