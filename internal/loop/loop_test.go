package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/testwait"
	"github.com/sampled/sampled/internal/tools"
)

var stdTools = []string{"std__calculate", "std__json_query", "std__now", "std__text_stats"}

// TestOfflineCalculate runs the offline model against the built-in tools:
// it calls std__calculate, reads its result and answers in text.
func TestOfflineCalculate(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	e, store := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg})
	id := start(t, e, loop.Spec{Messages: prompt("Please calculate 2 * (3 + 4)")})
	if !strings.HasPrefix(id, "loop_") {
		t.Errorf("id %q does not start with loop_", id)
	}
	evs := collect(t, store, id)

	want := []string{
		loop.EventLoopStarted,
		loop.EventModelCompleted, loop.EventToolStarted, loop.EventToolCompleted, loop.EventIterationCompleted,
		loop.EventModelCompleted, loop.EventIterationCompleted,
		loop.EventLoopCompleted,
	}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}

	started := evs[0].Data
	if started.ID != id || started.MaxIterations != 10 || started.TimeoutMs != 300000 || started.TraceID == "" {
		t.Errorf("loop.started = %s", evs[0].Raw)
	}
	if diff := cmp.Diff(stdTools, started.Tools); diff != "" {
		t.Errorf("loop.started tools (-want +got):\n%s", diff)
	}

	calls := evs[1].toolCalls(t)
	if len(calls) != 1 || calls[0].Name != "std__calculate" || calls[0].ID == "" {
		t.Fatalf("model.completed 1 toolCalls = %s", evs[1].Data.ToolCalls)
	}
	var args struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal(calls[0].Arguments, &args); err != nil || args.Expression != "2 * (3 + 4)" {
		t.Errorf("arguments = %s (%v), want expression 2 * (3 + 4)", calls[0].Arguments, err)
	}
	if d := evs[1].Data; d.Iteration != 1 || d.StopReason != sampler.StopToolUse || d.Model != "offline/default" {
		t.Errorf("model.completed 1 = %s", evs[1].Raw)
	}

	ts, tc := evs[2].Data, evs[3].Data
	if ts.Iteration != 1 || ts.CallID != calls[0].ID || ts.Name != "std__calculate" || string(ts.Arguments) != string(calls[0].Arguments) {
		t.Errorf("tool.started = %s", evs[2].Raw)
	}
	if tc.Iteration != 1 || tc.CallID != calls[0].ID || tc.Name != "std__calculate" || tc.IsError || evs[3].text() != "14" {
		t.Errorf("tool.completed = %s, want the text 14 and isError false", evs[3].Raw)
	}
	var structured struct {
		Value float64 `json:"value"`
	}
	if err := json.Unmarshal(tc.StructuredContent, &structured); err != nil || structured.Value != 14 {
		t.Errorf("tool.completed structuredContent = %s", tc.StructuredContent)
	}

	if d := evs[4].Data; d.Iteration != 1 || d.TraceID != started.TraceID {
		t.Errorf("iteration.completed 1 = %s", evs[4].Raw)
	}
	if diff := cmp.Diff([]string{"std__calculate"}, evs[4].toolNames(t)); diff != "" {
		t.Errorf("iteration.completed 1 toolCalls (-want +got):\n%s", diff)
	}

	answer := evs[5].Data
	if answer.Iteration != 2 || !strings.Contains(answer.Text, "14") || len(evs[5].toolCalls(t)) != 0 {
		t.Errorf("model.completed 2 = %s, want a text quoting 14 and no tool calls", evs[5].Raw)
	}
	if d := evs[6].Data; d.Iteration != 2 || len(evs[6].toolNames(t)) != 0 {
		t.Errorf("iteration.completed 2 = %s", evs[6].Raw)
	}

	done := last(evs)
	if done.Status != loop.StatusCompleted || !done.Success || done.TotalIterations != 2 || done.Result != answer.Text ||
		done.Error != "" || done.TraceID != started.TraceID {
		t.Errorf("loop.completed = %s", evs[7].Raw)
	}
	if done.Usage.InputTokens == 0 || done.Usage.OutputTokens == 0 {
		t.Errorf("loop.completed usage = %+v, want both counts", done.Usage)
	}

	snap := snapshot(t, store, id)
	if snap.ID != id || snap.Status != loop.StatusCompleted || snap.Iterations != 2 || snap.Result != answer.Text ||
		snap.Model != "offline/default" || snap.FinishedAt == nil || snap.Error != "" || snap.TraceID != started.TraceID {
		t.Errorf("snapshot = %+v", snap)
	}
	var roles, types []string
	for _, m := range snap.Messages {
		roles = append(roles, string(m.Role))
		types = append(types, m.Content[0].Type)
	}
	if diff := cmp.Diff([]string{"user", "assistant", "user", "assistant"}, roles); diff != "" {
		t.Errorf("transcript roles (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"text", "tool_use", "tool_result", "text"}, types); diff != "" {
		t.Errorf("transcript block types (-want +got):\n%s", diff)
	}
	if len(snap.Messages) == 4 {
		res := snap.Messages[2].Content[0]
		if res.ToolUseID != calls[0].ID || res.IsError == nil || *res.IsError || sampler.TextOf(res.Content) != "14" {
			t.Errorf("transcript tool_result = %+v", res)
		}
	}
	if diff := cmp.Diff(stdTools, snap.Tools); diff != "" {
		t.Errorf("snapshot tools (-want +got):\n%s", diff)
	}
}

// gate is a ToolSource that holds each of the first size calls until size
// calls are in flight together, and records the most calls in flight at
// once. With fewer than size calls allowed to run concurrently it would
// wait until the calls' context ends: the test fails instead of passing by
// chance.
type gate struct {
	loop.ToolSource
	size int
	full chan struct{}

	mu                 sync.Mutex
	arrived, in, maxIn int
}

func newGate(src loop.ToolSource, size int) *gate {
	return &gate{ToolSource: src, size: size, full: make(chan struct{})}
}

func (g *gate) Call(ctx context.Context, name string, args json.RawMessage) (*tools.Result, error) {
	g.mu.Lock()
	g.arrived++
	g.in++
	g.maxIn = max(g.maxIn, g.in)
	if g.arrived == g.size {
		close(g.full)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.in--
		g.mu.Unlock()
	}()
	select {
	case <-g.full:
	case <-ctx.Done():
		return nil, fmt.Errorf("gate: only %d calls arrived: %w", g.size, ctx.Err())
	}
	return g.ToolSource.Call(ctx, name, args)
}

func (g *gate) max() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxIn
}

// TestParallelToolCalls has the model ask for several slow calls at once:
// up to Parallel of them run together, and their results go back to the
// model in call order.
func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, true, nil)
	tests := []struct {
		name     string
		parallel int
		calls    int
	}{
		{"one at a time", 1, 2},
		{"two together", 2, 2},
		{"bounded by two", 2, 3},
		{"all together", 4, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var calls []call
			var ids []string
			for i := range tt.calls {
				id := fmt.Sprintf("call_%d", i+1)
				ids = append(ids, id)
				calls = append(calls, call{id, "test__slow", map[string]any{"ms": 100, "marker": filepath.Join(dir, id)}})
			}
			f := newFakeOpenAI(t, sequence(reply{body: toolCallsReply(calls...)}, reply{body: textReply("all done")}))
			want := min(tt.parallel, tt.calls)
			g := newGate(reg, want)
			e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: g, Parallel: tt.parallel})
			id := start(t, e, loop.Spec{Messages: prompt("Wait a little, several times.")})
			evs := collect(t, store, id)
			if d := last(evs); d.Status != loop.StatusCompleted || d.TotalIterations != 2 {
				t.Fatalf("loop.completed = %s", evs[len(evs)-1].Raw)
			}

			// How many calls the events show running at once.
			var order []string
			running, most := 0, 0
			for _, ev := range evs {
				switch ev.Name {
				case loop.EventToolStarted:
					running++
					most = max(most, running)
					order = append(order, "started "+ev.Data.CallID)
				case loop.EventToolCompleted:
					running--
					order = append(order, "completed "+ev.Data.CallID)
					if ev.Data.IsError || ev.text() != "done" {
						t.Errorf("tool.completed = %s, want the text done", ev.Raw)
					}
				}
			}
			if most != want || g.max() != want {
				t.Errorf("calls in flight at once: %d by the events, %d by the tools, want %d; order %v", most, g.max(), want, order)
			}
			if tt.parallel == 1 {
				// One at a time, in call order.
				var want []string
				for _, id := range ids {
					want = append(want, "started "+id, "completed "+id)
				}
				if diff := cmp.Diff(want, order); diff != "" {
					t.Errorf("tool events (-want +got):\n%s", diff)
				}
			}
			if got := len(named(evs, loop.EventToolCompleted)); got != tt.calls {
				t.Errorf("%d tool.completed events, want %d", got, tt.calls)
			}

			reqs := f.requests()
			if len(reqs) != 2 {
				t.Fatalf("the model got %d requests, want 2", len(reqs))
			}
			var got []string
			for _, m := range reqs[1].toolMessages() {
				got = append(got, m.CallID+": "+m.Content)
			}
			var wantMsgs []string
			for _, id := range ids {
				wantMsgs = append(wantMsgs, id+": done")
			}
			if diff := cmp.Diff(wantMsgs, got); diff != "" {
				t.Errorf("role:tool messages of request 2 (-want +got):\n%s\n%s", diff, f.body(2))
			}
		})
	}
}

// TestToolErrorResults checks that a failing, an unknown and a disallowed
// tool become error results that the model reads, and that the loop goes on
// to the model's answer.
func TestToolErrorResults(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, true, nil)
	tests := []struct {
		name     string
		allowed  []string
		tool     string
		args     any
		wantText string
		// wantTools are the tools the model is offered; nil means all.
		wantTools []string
	}{
		{name: "failing tool", tool: "test__fail", wantText: "deliberate failure"},
		{name: "unknown tool", tool: "nope__x", wantText: `unknown tool "nope__x"`},
		{name: "disallowed tool", allowed: []string{"std__*"}, tool: "test__echo", args: map[string]any{"text": "hi"},
			wantText: `tool "test__echo" is not allowed in this loop`, wantTools: stdTools},
	}
	var allTools []string
	for _, tool := range reg.Tools() {
		allTools = append(allTools, tool.Name)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, sequence(reply{body: toolCallsReply(call{"call_1", tt.tool, tt.args})}, reply{body: textReply("I see.")}))
			m := metrics.New(prometheus.NewRegistry())
			e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg, Metrics: m})
			id := start(t, e, loop.Spec{Messages: prompt("Use a tool."), AllowedTools: tt.allowed})
			evs := collect(t, store, id)

			want := []string{
				loop.EventLoopStarted,
				loop.EventModelCompleted, loop.EventToolStarted, loop.EventToolCompleted, loop.EventIterationCompleted,
				loop.EventModelCompleted, loop.EventIterationCompleted,
				loop.EventLoopCompleted,
			}
			if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			tc := evs[3]
			if !tc.Data.IsError || tc.Data.Name != tt.tool || tc.Data.CallID != "call_1" || !strings.Contains(tc.text(), tt.wantText) {
				t.Errorf("tool.completed = %s, want isError with %q", tc.Raw, tt.wantText)
			}
			if d := last(evs); d.Status != loop.StatusCompleted || !d.Success || d.Result != "I see." || d.TotalIterations != 2 {
				t.Errorf("loop.completed = %s", evs[len(evs)-1].Raw)
			}

			reqs := f.requests()
			if len(reqs) != 2 {
				t.Fatalf("the model got %d requests, want 2", len(reqs))
			}
			msgs := reqs[1].toolMessages()
			if len(msgs) != 1 || msgs[0].CallID != "call_1" || !strings.Contains(msgs[0].Content, tt.wantText) {
				t.Errorf("role:tool messages of request 2 = %+v, want call_1 with %q", msgs, tt.wantText)
			}
			wantTools := tt.wantTools
			if wantTools == nil {
				wantTools = allTools
			}
			for i, r := range reqs {
				if diff := cmp.Diff(wantTools, r.toolNames()); diff != "" {
					t.Errorf("tools of request %d (-want +got):\n%s", i+1, diff)
				}
			}
			if diff := cmp.Diff(wantTools, evs[0].Data.Tools); diff != "" {
				t.Errorf("loop.started tools (-want +got):\n%s", diff)
			}
			wantDisallowed := 0.0
			if tt.allowed != nil {
				wantDisallowed = 1
			}
			if got := testutil.ToFloat64(m.ToolCalls.WithLabelValues("other", "disallowed")); got != wantDisallowed {
				t.Errorf("ToolCalls{other,disallowed} = %v, want %v", got, wantDisallowed)
			}
		})
	}
}

// TestMaxIterations has a model that always calls a tool: the loop stops
// after maxIterations model calls, the last one sent with tool_choice none,
// and the tools asked for on the last iteration are not run.
func TestMaxIterations(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	f := newFakeOpenAI(t, func(n int, _ chatRequest) reply {
		return reply{body: toolCallsReply(call{fmt.Sprintf("call_%d", n), "std__calculate", map[string]any{"expression": fmt.Sprintf("%d + 1", n)}})}
	})
	e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg})
	id := start(t, e, loop.Spec{Messages: prompt("Count forever."), MaxIterations: ptr(3)})
	evs := collect(t, store, id)

	want := []string{
		loop.EventLoopStarted,
		loop.EventModelCompleted, loop.EventToolStarted, loop.EventToolCompleted, loop.EventIterationCompleted,
		loop.EventModelCompleted, loop.EventToolStarted, loop.EventToolCompleted, loop.EventIterationCompleted,
		loop.EventModelCompleted, loop.EventIterationCompleted,
		loop.EventLoopCompleted,
	}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if d := last(evs); d.Status != loop.StatusMaxIterations || d.Success || d.TotalIterations != 3 {
		t.Errorf("loop.completed = %s", evs[len(evs)-1].Raw)
	}
	var results []string
	for _, ev := range named(evs, loop.EventToolCompleted) {
		results = append(results, ev.text())
	}
	if diff := cmp.Diff([]string{"2", "3"}, results); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}

	reqs := f.requests()
	var choices []string
	for _, r := range reqs {
		choices = append(choices, r.toolChoice())
	}
	if diff := cmp.Diff([]string{"", "", `"none"`}, choices); diff != "" {
		t.Errorf("tool_choice per request (-want +got):\n%s", diff)
	}
	if snap := snapshot(t, store, id); snap.Status != loop.StatusMaxIterations || snap.Iterations != 3 || snap.FinishedAt == nil {
		t.Errorf("snapshot = %+v", snap)
	}
}

// TestToolChoice checks the tool_choice sent per iteration: a forced choice
// is relaxed to auto after the first iteration, and the last allowed one
// is sent with none.
func TestToolChoice(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	tests := []struct {
		name          string
		choice        *sampler.ToolChoice
		maxIterations int
		want          []string
	}{
		{"named tool", &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "std__calculate"}, 5,
			[]string{`{"type":"function","function":{"name":"std__calculate"}}`, `"auto"`}},
		{"required", &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}, 5, []string{`"required"`, `"auto"`}},
		{"auto", &sampler.ToolChoice{Mode: sampler.ToolChoiceAuto}, 5, []string{`"auto"`, `"auto"`}},
		{"default", nil, 5, []string{"", ""}},
		{"required then last iteration", &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}, 2, []string{`"required"`, `"none"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, sequence(
				reply{body: toolCallsReply(call{"call_1", "std__calculate", map[string]any{"expression": "6 * 7"}})},
				reply{body: textReply("42")}))
			e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg})
			id := start(t, e, loop.Spec{Messages: prompt("What is 6 * 7?"), ToolChoice: tt.choice, MaxIterations: ptr(tt.maxIterations)})
			evs := collect(t, store, id)
			if d := last(evs); d.Status != loop.StatusCompleted || d.Result != "42" {
				t.Errorf("loop.completed = %s", evs[len(evs)-1].Raw)
			}
			reqs := f.requests()
			var got []string
			for _, r := range reqs {
				got = append(got, r.toolChoice())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tool_choice per request (-want +got):\n%s", diff)
			}
			if len(reqs) == 2 {
				want := []toolMessage{{CallID: "call_1", Content: "42\n" + `{"value":42}`}}
				got := reqs[1].toolMessages()
				// The adapter may render structured content its own way;
				// the text must come first.
				if len(got) != 1 || got[0].CallID != "call_1" || !strings.HasPrefix(got[0].Content, "42") {
					t.Errorf("role:tool messages of request 2 = %+v, want like %+v\n%s", got, want, f.body(2))
				}
			}
		})
	}
}

// TestTimeout runs into the loop's time limit while a slow tool runs: the
// loop ends as timeout and the tool's call is cancelled on its server.
func TestTimeout(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, true, nil)
	marker := filepath.Join(t.TempDir(), "marker")
	f := newFakeOpenAI(t, sequence(
		reply{body: toolCallsReply(call{"call_1", "test__slow", map[string]any{"ms": 60000, "marker": marker}})},
		reply{body: textReply("too late")}))
	e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg})
	// The limit leaves ample time for the call to reach the server first.
	id := start(t, e, loop.Spec{Messages: prompt("Take your time."), Timeout: ptr[time.Duration](2 * time.Second)})
	evs := collect(t, store, id)

	want := []string{
		loop.EventLoopStarted,
		loop.EventModelCompleted, loop.EventToolStarted, loop.EventToolCompleted, loop.EventIterationCompleted,
		loop.EventLoopCompleted,
	}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if tc := evs[3]; !tc.Data.IsError || !strings.Contains(tc.text(), "cancelled") {
		t.Errorf("tool.completed = %s, want an error result saying cancelled", tc.Raw)
	}
	d := last(evs)
	if d.Status != loop.StatusTimeout || d.Success || d.TotalIterations != 1 || !strings.Contains(d.Error, "2s") {
		t.Errorf("loop.completed = %s", evs[len(evs)-1].Raw)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("the model got %d requests, want 1; the last:\n%s\nevents:\n%s", n, f.body(n), rawEvents(evs))
	}
	mcptest.PollFile(t, marker, "cancelled", waitTimeout)
	if snap := snapshot(t, store, id); snap.Status != loop.StatusTimeout || snap.Error != d.Error {
		t.Errorf("snapshot = %+v", snap)
	}
}

// TestToolTimeout runs into the per-tool time limit: the call becomes an
// error result, is cancelled on its server, and the loop goes on.
func TestToolTimeout(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, true, nil)
	marker := filepath.Join(t.TempDir(), "marker")
	f := newFakeOpenAI(t, sequence(
		reply{body: toolCallsReply(call{"call_1", "test__slow", map[string]any{"ms": 60000, "marker": marker}})},
		reply{body: textReply("never mind")}))
	e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg, ToolTimeout: 200 * time.Millisecond})
	id := start(t, e, loop.Spec{Messages: prompt("Take your time.")})
	evs := collect(t, store, id)
	tcs := named(evs, loop.EventToolCompleted)
	if len(tcs) != 1 || !tcs[0].Data.IsError || !strings.Contains(tcs[0].text(), "did not answer within 200ms") {
		t.Errorf("tool.completed = %v, want an error result saying it did not answer within 200ms", tcs)
	}
	if d := last(evs); d.Status != loop.StatusCompleted || d.Result != "never mind" {
		t.Errorf("loop.completed = %s", evs[len(evs)-1].Raw)
	}
	mcptest.PollFile(t, marker, "cancelled", waitTimeout)
}

// slowLoop starts a loop whose model calls test__slow for a minute and
// returns once the call is running on the server.
func slowLoop(t *testing.T, ctx context.Context) (e *loop.Engine, store *memory.Store, m *metrics.Metrics, w *watcher, id, marker string) {
	t.Helper()
	reg := newRegistry(t, true, nil)
	marker = filepath.Join(t.TempDir(), "marker")
	f := newFakeOpenAI(t, sequence(
		reply{body: toolCallsReply(call{"call_1", "test__slow", map[string]any{"ms": 60000, "marker": marker}})},
		reply{body: textReply("too late")}))
	m = metrics.New(prometheus.NewRegistry())
	e, store = newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg, Metrics: m})
	id, err := e.Start(ctx, loop.Spec{Messages: prompt("Take your time.")})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	w = watch(t, store, id)
	w.until("tool.started", func(ev event) bool { return ev.Name == loop.EventToolStarted })
	// tool.started precedes the call; wait until the server runs it.
	mcptest.PollFile(t, marker, "started", waitTimeout)
	return e, store, m, w, id, marker
}

// checkCancelled checks the events of a loop cancelled during its slow
// call.
func checkCancelled(t *testing.T, evs []event, marker string) {
	t.Helper()
	want := []string{
		loop.EventLoopStarted,
		loop.EventModelCompleted, loop.EventToolStarted, loop.EventToolCompleted, loop.EventIterationCompleted,
		loop.EventLoopCompleted,
	}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if tc := evs[3]; !tc.Data.IsError || !strings.Contains(tc.text(), "cancelled") {
		t.Errorf("tool.completed = %s, want an error result saying cancelled", tc.Raw)
	}
	if d := last(evs); d.Status != loop.StatusCancelled || d.Success || d.Error != "cancelled" {
		t.Errorf("loop.completed = %s", evs[len(evs)-1].Raw)
	}
	mcptest.PollFile(t, marker, "cancelled", waitTimeout)
}

// TestCancel cancels a loop through the store while its tool runs.
func TestCancel(t *testing.T) {
	t.Parallel()
	e, store, m, w, id, marker := slowLoop(t, context.Background())
	if err := store.Cancel(context.Background(), id); err != nil {
		t.Fatalf("Cancel of a running loop: %v", err)
	}
	checkCancelled(t, w.all(), marker)
	// The terminal event has been read: the run is no longer cancellable,
	// without waiting for the engine to wind down.
	if err := store.Cancel(context.Background(), id); !errors.Is(err, runs.ErrFinished) {
		t.Errorf("Cancel after the terminal event = %v, want runs.ErrFinished", err)
	}
	e.Close()
	if got := testutil.ToFloat64(m.LoopsTotal.WithLabelValues(loop.StatusCancelled)); got != 1 {
		t.Errorf("LoopsTotal{cancelled} = %v, want 1", got)
	}
}

// TestStartContextEnds ends the context given to Start (a streaming client
// that went away): the loop is cancelled.
func TestStartContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, _, w, _, marker := slowLoop(t, ctx)
	cancel()
	checkCancelled(t, w.all(), marker)
}

// TestCloseCancelsRunningLoops closes the engine while a loop's tool runs:
// Close cancels the loop and returns after its terminal event.
func TestCloseCancelsRunningLoops(t *testing.T) {
	t.Parallel()
	e, store, m, w, id, marker := slowLoop(t, context.Background())
	e.Close()
	// Everything happened before Close returned.
	if got := testutil.ToFloat64(m.LoopsActive); got != 0 {
		t.Errorf("LoopsActive after Close = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.LoopsTotal.WithLabelValues(loop.StatusCancelled)); got != 1 {
		t.Errorf("LoopsTotal{cancelled} = %v, want 1", got)
	}
	if err := store.Cancel(context.Background(), id); !errors.Is(err, runs.ErrFinished) {
		t.Errorf("Cancel after Close = %v, want runs.ErrFinished", err)
	}
	checkCancelled(t, w.all(), marker)
	e.Close() // again: nothing to do
	if _, err := e.Start(context.Background(), loop.Spec{Messages: prompt("Too late.")}); !errors.Is(err, loop.ErrClosed) {
		t.Errorf("Start after Close = %v, want loop.ErrClosed", err)
	}
}

// TestDyingServer has the model call a tool that kills its MCP server, then
// another tool of that server: both become results the model reads, the
// loop completes, and the registry still serves.
func TestDyingServer(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, true, nil)
	f := newFakeOpenAI(t, sequence(
		reply{body: toolCallsReply(call{"call_1", "test__crash", nil})},
		reply{body: toolCallsReply(call{"call_2", "test__echo", map[string]any{"text": "still there?"}})},
		reply{body: textReply("carrying on")}))
	e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg})
	id := start(t, e, loop.Spec{Messages: prompt("Crash, then echo.")})
	evs := collect(t, store, id)

	tcs := named(evs, loop.EventToolCompleted)
	if len(tcs) != 2 {
		t.Fatalf("%d tool.completed events, want 2: %v", len(tcs), eventNames(evs))
	}
	if crash := tcs[0]; crash.Data.Name != "test__crash" || !crash.Data.IsError || crash.text() == "" {
		t.Errorf("crash tool.completed = %s, want an error result", crash.Raw)
	}
	// The echo call may come before or after the registry reconnected.
	if echo := tcs[1]; echo.Data.Name != "test__echo" || (!echo.Data.IsError && echo.text() != "still there?") || (echo.Data.IsError && echo.text() == "") {
		t.Errorf("echo tool.completed = %s, want the echo or an error result", echo.Raw)
	}
	if d := last(evs); d.Status != loop.StatusCompleted || d.Result != "carrying on" || d.TotalIterations != 3 {
		t.Errorf("loop.completed = %s", evs[len(evs)-1].Raw)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := reg.Call(ctx, "std__calculate", json.RawMessage(`{"expression":"1 + 1"}`))
	if err != nil || res.IsError || sampler.TextOf(res.Content) != "2" {
		t.Errorf("std__calculate after the crash = %+v, %v", res, err)
	}
	testwait.Poll(t, 10*time.Millisecond, waitTimeout, "the test server to come back", func() bool {
		return slices.ContainsFunc(reg.Status(), func(st tools.ServerStatus) bool { return st.Name == "test" && st.Connected })
	})
	res, err = reg.Call(ctx, "test__echo", json.RawMessage(`{"text":"back"}`))
	if err != nil || sampler.TextOf(res.Content) != "back" {
		t.Errorf("test__echo after reconnection = %+v, %v", res, err)
	}
}

// TestModelFailure checks loops whose model call fails.
func TestModelFailure(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	badRequest := reply{status: 400, body: `{"error":{"message":"Invalid value for 'messages'.","type":"invalid_request_error","param":"messages","code":null}}`}
	tests := []struct {
		name      string
		replies   []reply
		model     string
		wantIters int
		wantError string
		wantCalls int
	}{
		{name: "bad request", replies: []reply{badRequest}, wantError: "Invalid value for 'messages'.", wantCalls: 1},
		{name: "bad request after a tool call", replies: []reply{
			{body: toolCallsReply(call{"call_1", "std__calculate", map[string]any{"expression": "1"}})}, badRequest,
		}, wantIters: 1, wantError: "Invalid value for 'messages'.", wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, sequence(tt.replies...))
			m := metrics.New(prometheus.NewRegistry())
			e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg, Metrics: m})
			id := start(t, e, loop.Spec{Messages: prompt("Hello"), ModelSpec: tt.model})
			evs := collect(t, store, id)
			d := last(evs)
			if d.Status != loop.StatusFailed || d.Success || d.TotalIterations != tt.wantIters || !strings.Contains(d.Error, tt.wantError) {
				t.Errorf("loop.completed = %s, want failed with %q", evs[len(evs)-1].Raw, tt.wantError)
			}
			if got := len(named(evs, loop.EventModelCompleted)); got != tt.wantIters {
				t.Errorf("%d model.completed events, want %d", got, tt.wantIters)
			}
			if got := len(f.requests()); got != tt.wantCalls {
				t.Errorf("the model got %d requests, want %d", got, tt.wantCalls)
			}
			snap := snapshot(t, store, id)
			if snap.Status != loop.StatusFailed || snap.Error != d.Error || snap.FinishedAt == nil {
				t.Errorf("snapshot = %+v", snap)
			}
			if got := testutil.ToFloat64(m.LoopsTotal.WithLabelValues(loop.StatusFailed)); got != 1 {
				t.Errorf("LoopsTotal{failed} = %v, want 1", got)
			}
		})
	}
}

// TestMetrics runs a completed, a max_iterations and a failed loop and
// reads the loop metrics.
func TestMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New(prometheus.NewRegistry())
	reg := newRegistry(t, false, m)
	f := newFakeOpenAI(t, func(_ int, req chatRequest) reply {
		switch {
		case req.prompt() == "fail":
			return reply{status: 400, body: `{"error":{"message":"no","type":"invalid_request_error","param":null,"code":null}}`}
		case req.prompt() == "forever" || len(req.toolMessages()) == 0:
			return reply{body: toolCallsReply(call{"call_1", "std__calculate", map[string]any{"expression": "1 + 1"}})}
		default:
			return reply{body: textReply("2")}
		}
	})
	e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg, Metrics: m, MaxIterations: 2})
	for _, p := range []string{"once", "forever", "fail"} {
		collect(t, store, start(t, e, loop.Spec{Messages: prompt(p)}))
	}
	// Close waits for the loops' goroutines, which record the last metrics
	// after their terminal event.
	e.Close()

	counters := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"LoopsTotal{completed}", m.LoopsTotal.WithLabelValues(loop.StatusCompleted), 1},
		{"LoopsTotal{max_iterations}", m.LoopsTotal.WithLabelValues(loop.StatusMaxIterations), 1},
		{"LoopsTotal{failed}", m.LoopsTotal.WithLabelValues(loop.StatusFailed), 1},
		{"LoopsTotal{cancelled}", m.LoopsTotal.WithLabelValues(loop.StatusCancelled), 0},
		{"LoopsActive", m.LoopsActive, 0},
		{"ToolCalls{std__calculate,ok}", m.ToolCalls.WithLabelValues("std__calculate", "ok"), 2},
		{"SSEEvents{loop.started}", m.SSEEvents.WithLabelValues(loop.EventLoopStarted), 3},
		// once: 2, forever: 2 (the second still asks for a tool), fail: 0.
		{"SSEEvents{model.completed}", m.SSEEvents.WithLabelValues(loop.EventModelCompleted), 4},
		{"SSEEvents{tool.started}", m.SSEEvents.WithLabelValues(loop.EventToolStarted), 2},
		{"SSEEvents{tool.completed}", m.SSEEvents.WithLabelValues(loop.EventToolCompleted), 2},
		{"SSEEvents{iteration.completed}", m.SSEEvents.WithLabelValues(loop.EventIterationCompleted), 4},
		{"SSEEvents{loop.completed}", m.SSEEvents.WithLabelValues(loop.EventLoopCompleted), 3},
	}
	for _, c := range counters {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}

	// LoopIterations observed 2, 2 and 0.
	count, sum := histogram(t, m.LoopIterations)
	if count != 3 || sum != 4 {
		t.Errorf("LoopIterations: count %d sum %v, want 3 and 4", count, sum)
	}
}

// histogram returns the sample count and sum of a histogram.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	if err := r.Register(h); err != nil {
		t.Fatal(err)
	}
	mfs, err := r.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gather: %v, %v", mfs, err)
	}
	hist := mfs[0].GetMetric()[0].GetHistogram()
	return hist.GetSampleCount(), hist.GetSampleSum()
}

// TestInvalidSpec checks the specs Start refuses, with the path of the
// first bad field.
func TestInvalidSpec(t *testing.T) {
	t.Parallel()
	e, store := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: newRegistry(t, false, nil)})
	msgs := prompt("Hello")
	tests := []struct {
		name  string
		spec  loop.Spec
		paths []string
	}{
		{"no messages", loop.Spec{}, []string{"/messages"}},
		{"maxIterations 101", loop.Spec{Messages: msgs, MaxIterations: ptr(101)}, []string{"/maxIterations"}},
		{"maxIterations negative", loop.Spec{Messages: msgs, MaxIterations: ptr(-1)}, []string{"/maxIterations"}},
		{"timeout negative", loop.Spec{Messages: msgs, Timeout: ptr[time.Duration](-time.Millisecond)}, []string{"/timeoutMs"}},
		{"timeout over an hour", loop.Spec{Messages: msgs, Timeout: ptr[time.Duration](time.Hour + time.Millisecond)}, []string{"/timeoutMs"}},
		{"bad glob", loop.Spec{Messages: msgs, AllowedTools: []string{"std__*", "["}}, []string{"/allowedTools/1"}},
		{"unknown model", loop.Spec{Messages: msgs, ModelSpec: "nope/x"}, []string{"/model"}},
		{"maxTokens negative", loop.Spec{Messages: msgs, MaxTokens: ptr(-5)}, []string{"/maxTokens"}},
		{"temperature out of range", loop.Spec{Messages: msgs, Temperature: ptr(3.0)}, []string{"/temperature"}},
		{"forced tool that does not exist", loop.Spec{Messages: msgs, ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "nope"}}, []string{"/toolChoice/name"}},
		{"forced tool not allowed", loop.Spec{Messages: msgs, AllowedTools: []string{"std__now"},
			ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "std__calculate"}}, []string{"/toolChoice/name"}},
		{"several", loop.Spec{MaxIterations: ptr(101), Timeout: ptr[time.Duration](-1), AllowedTools: []string{"["}},
			[]string{"/messages", "/maxIterations", "/timeoutMs", "/allowedTools/0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := e.Start(context.Background(), tt.spec)
			var inv *sampler.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Start = %q, %v; want an *sampler.InvalidError", id, err)
			}
			if id != "" {
				t.Errorf("id = %q, want none", id)
			}
			if !errors.Is(err, sampler.ErrInvalid) {
				t.Errorf("%v is not sampler.ErrInvalid", err)
			}
			var paths []string
			for _, fe := range inv.Errors {
				paths = append(paths, fe.Path)
			}
			if diff := cmp.Diff(tt.paths, paths); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(inv.Detail, tt.paths[0]+": ") {
				t.Errorf("Detail = %q, want it to start with %s", inv.Detail, tt.paths[0])
			}
		})
	}

	// Limits at the bounds are accepted.
	ok := loop.Spec{Messages: msgs, MaxIterations: ptr(100), Timeout: ptr[time.Duration](time.Hour), AllowedTools: []string{"std__*", "x?[a-c]"}}
	id, err := e.Start(context.Background(), ok)
	if err != nil {
		t.Fatalf("Start(%+v): %v", ok, err)
	}
	// The offline model answers at once: the run may have ended already.
	if err := store.Cancel(context.Background(), id); err != nil && !errors.Is(err, runs.ErrFinished) {
		t.Errorf("Cancel: %v", err)
	}
}

// TestModelCallInterrupted ends loops while their model call hangs: the
// cancellation reaches the upstream request.
func TestModelCallInterrupted(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	tests := []struct {
		name       string
		timeout    *time.Duration
		cancel     bool
		wantStatus string
		wantError  string
	}{
		{name: "cancel", cancel: true, wantStatus: loop.StatusCancelled, wantError: "cancelled"},
		{name: "timeout", timeout: ptr(300 * time.Millisecond), wantStatus: loop.StatusTimeout, wantError: "the loop did not finish within 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, sequence(reply{hang: true}))
			e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg})
			id := start(t, e, loop.Spec{Messages: prompt("Think hard."), Timeout: tt.timeout})
			w := watch(t, store, id)
			testwait.Recv(t, f.arrived, "the model call")
			if tt.cancel {
				if err := store.Cancel(context.Background(), id); err != nil {
					t.Fatalf("Cancel of a running loop: %v", err)
				}
			}
			evs := w.all()
			if diff := cmp.Diff([]string{loop.EventLoopStarted, loop.EventLoopCompleted}, eventNames(evs)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			if d := last(evs); d.Status != tt.wantStatus || d.Success || d.TotalIterations != 0 || d.Error != tt.wantError {
				t.Errorf("loop.completed = %s, want %s with %q", evs[1].Raw, tt.wantStatus, tt.wantError)
			}
			testwait.Recv(t, f.gone, "the upstream request to be abandoned")
		})
	}
}

// TestRequestParameters checks what the model is sent: the spec's system
// prompt, maxTokens (or the engine's default) and temperature, the allowed
// tools, and the transcript of the loop so far.
func TestRequestParameters(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	zero := 0.0
	tests := []struct {
		name              string
		maxTokens         int // the sampling service's default
		spec              loop.Spec
		wantSystem        string
		wantMaxTokens     int
		wantTemperature   *float64
		wantTools         []string
		wantToolChoice    string
		wantModelRequests int
	}{
		{name: "defaults", wantMaxTokens: 1024, wantTools: stdTools, wantModelRequests: 2},
		{name: "service default maxTokens", maxTokens: 77, wantMaxTokens: 77, wantTools: stdTools, wantModelRequests: 2},
		{name: "spec", maxTokens: 77,
			spec:       loop.Spec{SystemPrompt: "Be brief.", MaxTokens: ptr(55), Temperature: &zero, AllowedTools: []string{"std__calc*", "std__now"}},
			wantSystem: "Be brief.", wantMaxTokens: 55, wantTemperature: &zero, wantTools: []string{"std__calculate", "std__now"}, wantModelRequests: 2},
		// With no tool allowed, no tools and no tool_choice are sent,
		// even a forced one.
		{name: "no tools", spec: loop.Spec{AllowedTools: []string{"nope__*"}, ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}},
			wantMaxTokens: 1024, wantModelRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, func(_ int, req chatRequest) reply {
				if len(req.Tools) > 0 && len(req.toolMessages()) == 0 {
					return reply{body: toolCallsReply(call{"call_1", "std__calculate", map[string]any{"expression": "2 ^ 10"}})}
				}
				return reply{body: textReply("1024")}
			})
			e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, tt.maxTokens), Tools: reg})
			spec := tt.spec
			spec.Messages = prompt("What is 2 ^ 10?")
			evs := collect(t, store, start(t, e, spec))
			if d := last(evs); d.Status != loop.StatusCompleted || d.Result != "1024" {
				t.Fatalf("loop.completed = %s", evs[len(evs)-1].Raw)
			}
			wantStarted := tt.wantTools
			if wantStarted == nil {
				wantStarted = []string{}
			}
			if diff := cmp.Diff(wantStarted, evs[0].Data.Tools); diff != "" {
				t.Errorf("loop.started tools (-want +got):\n%s", diff)
			}

			reqs := f.requests()
			if len(reqs) != tt.wantModelRequests {
				t.Fatalf("the model got %d requests, want %d", len(reqs), tt.wantModelRequests)
			}
			for i, r := range reqs {
				if r.MaxCompletionTokens != tt.wantMaxTokens {
					t.Errorf("request %d max_completion_tokens = %d, want %d", i+1, r.MaxCompletionTokens, tt.wantMaxTokens)
				}
				if diff := cmp.Diff(tt.wantTemperature, r.Temperature); diff != "" {
					t.Errorf("request %d temperature (-want +got):\n%s", i+1, diff)
				}
				if diff := cmp.Diff(tt.wantTools, r.toolNames()); diff != "" {
					t.Errorf("request %d tools (-want +got):\n%s", i+1, diff)
				}
				if r.toolChoice() != tt.wantToolChoice {
					t.Errorf("request %d tool_choice = %s, want %q", i+1, r.toolChoice(), tt.wantToolChoice)
				}
				var roles []string
				for _, m := range r.Messages {
					roles = append(roles, m.Role)
				}
				want := []string{"user", "assistant", "tool"}[:1+2*i]
				if tt.wantSystem != "" {
					want = append([]string{"system"}, want...)
					var system string
					if err := json.Unmarshal(r.Messages[0].Content, &system); err != nil || system != tt.wantSystem {
						t.Errorf("request %d system message = %s, want %q", i+1, r.Messages[0].Content, tt.wantSystem)
					}
				}
				if diff := cmp.Diff(want, roles); diff != "" {
					t.Errorf("request %d roles (-want +got):\n%s", i+1, diff)
				}
			}
			if len(reqs) == 2 {
				// The assistant's tool call, then its result.
				msgs := reqs[1].Messages
				asked := msgs[len(msgs)-2]
				if len(asked.ToolCalls) != 1 || asked.ToolCalls[0].ID != "call_1" || asked.ToolCalls[0].Function.Name != "std__calculate" {
					t.Errorf("assistant message of request 2 = %+v", asked)
				}
				got := reqs[1].toolMessages()
				if len(got) != 1 || got[0].CallID != "call_1" || !strings.HasPrefix(got[0].Content, "1024") {
					t.Errorf("role:tool messages of request 2 = %+v\n%s", got, f.body(2))
				}
			}
		})
	}
}

// TestSnapshotWhileRunning reads a run's snapshot before its first model
// call has answered: it is running, with the allowed tools as an array
// (the API's LoopRun requires one) and the request's messages.
func TestSnapshotWhileRunning(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	f := newFakeOpenAI(t, sequence(reply{hang: true}))
	e, store := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg})
	id := start(t, e, loop.Spec{Messages: prompt("Think hard."), AllowedTools: []string{"std__now", "std__calc*"}})

	check := func(when string, wantTools []string) {
		t.Helper()
		raw, err := store.Snapshot(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		list, ok := m["tools"].([]any)
		if !ok {
			t.Errorf("%s: snapshot tools = %v, want an array\n%s", when, m["tools"], raw)
		}
		if wantTools != nil {
			var got []string
			for _, v := range list {
				s, _ := v.(string)
				got = append(got, s)
			}
			if diff := cmp.Diff(wantTools, got); diff != "" {
				t.Errorf("%s: snapshot tools (-want +got):\n%s", when, diff)
			}
		}
		if _, done := m["finishedAt"]; done || m["status"] != loop.StatusRunning {
			t.Errorf("%s: snapshot = %s, want running", when, raw)
		}
		snap := snapshot(t, store, id)
		if snap.ID != id || snap.Iterations != 0 || len(snap.Messages) != 1 || snap.MaxIterations != 10 || snap.TimeoutMs != 300000 || snap.CreatedAt.IsZero() {
			t.Errorf("%s: snapshot = %s", when, raw)
		}
	}
	// Right after Start the run may not have listed its tools yet.
	check("after Start", nil)
	testwait.Recv(t, f.arrived, "the model call")
	check("during the first model call", []string{"std__calculate", "std__now"})
	if err := store.Cancel(context.Background(), id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if d := last(collect(t, store, id)); d.Status != loop.StatusCancelled {
		t.Errorf("status %s, want cancelled", d.Status)
	}
}

func ptr[T any](v T) *T { return &v }

// finishProbe records what the engine gives Finish and whether it appended
// the terminal event any other way.
type finishProbe struct {
	*memory.Store
	finished chan json.RawMessage // the snapshot given to Finish
	appended chan string          // names given to Append
}

func (p *finishProbe) Append(ctx context.Context, id, name string, data json.RawMessage) (runs.Event, error) {
	p.appended <- name
	return p.Store.Append(ctx, id, name, data)
}

func (p *finishProbe) Finish(ctx context.Context, id, name string, data, snapshot json.RawMessage) (runs.Event, error) {
	p.finished <- snapshot
	return p.Store.Finish(ctx, id, name, data, snapshot)
}

// TestFinishCarriesFinalSnapshot: the engine records loop.completed and the
// run's final snapshot in one Finish, so that nobody reads the terminal
// event with a running snapshot, nor cancels a run whose terminal status
// can be read.
func TestFinishCarriesFinalSnapshot(t *testing.T) {
	t.Parallel()
	store := &finishProbe{Store: memory.New(memory.Options{}), finished: make(chan json.RawMessage, 1), appended: make(chan string, 100)}
	e, _ := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: newRegistry(t, false, nil), Store: store})
	start(t, e, loop.Spec{Messages: prompt("Please calculate 2 * (3 + 4)")})
	var snap loop.Snapshot
	select {
	case raw := <-store.finished:
		if err := json.Unmarshal(raw, &snap); err != nil {
			t.Fatalf("snapshot given to Finish: %v\n%s", err, raw)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no Finish")
	}
	if snap.Status != loop.StatusCompleted || snap.FinishedAt == nil || snap.Result == "" {
		t.Errorf("snapshot given to Finish: status %q, finishedAt %v, result %q; want the final one", snap.Status, snap.FinishedAt, snap.Result)
	}
	e.Close()
	close(store.appended)
	for name := range store.appended {
		if name == loop.EventLoopCompleted {
			t.Errorf("%s was appended, not given to Finish", name)
		}
	}
}
