package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/client"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// calcLoop is a loop the offline model runs in two iterations: a call of
// std__calculate, then an answer in text.
var calcLoop = client.LoopRequest{Prompt: "Please calculate 2 * (3 + 4)", AllowedTools: []string{"std__calculate"}, MaxIterations: 4}

// calcEvents are the names of calcLoop's events.
var calcEvents = []string{
	client.EventLoopStarted,
	client.EventModelCompleted, client.EventToolStarted, client.EventToolCompleted, client.EventIterationCompleted,
	client.EventModelCompleted, client.EventIterationCompleted,
	client.EventLoopCompleted,
}

// collect follows a run's events to the end.
func collect(t *testing.T, c *client.Client, id string) ([]client.Event, error) {
	t.Helper()
	var evs []client.Event
	for ev, err := range c.Events(context.Background(), id) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func names(evs []client.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Name)
	}
	return out
}

func TestLoopLifecycle(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	started, err := c.StartLoop(ctx, &calcLoop)
	if err != nil {
		t.Fatal(err)
	}
	want := client.LoopStarted{ID: started.ID, Status: client.LoopRunning,
		Links: client.LoopLinks{Self: "/v1/loops/" + started.ID, Events: "/v1/loops/" + started.ID + "/events"}}
	if diff := cmp.Diff(want, *started); diff != "" || !strings.HasPrefix(started.ID, "loop_") {
		t.Errorf("started (-want +got):\n%s", diff)
	}

	evs, err := collect(t, c, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(calcEvents, names(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	for i, ev := range evs {
		if ev.ID != int64(i+1) {
			t.Errorf("event %d has id %d", i, ev.ID)
		}
	}
	first := evs[0].Data.(*client.LoopStartedData)
	if first.ID != started.ID || first.TraceID == "" || first.MaxIterations != 4 || len(first.Tools) != 1 {
		t.Errorf("loop.started %+v", first)
	}
	call := evs[1].Data.(*client.ModelCompletedData)
	if call.StopReason != client.StopToolUse || len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != "std__calculate" {
		t.Errorf("model.completed %+v", call)
	}
	tool := evs[3].Data.(*client.ToolCompletedData)
	if tool.CallID != call.ToolCalls[0].ID || tool.IsError || len(tool.Content) != 1 || tool.Content[0].Type != client.BlockText {
		t.Errorf("tool.completed %+v", tool)
	}
	last := evs[len(evs)-1].Data.(*client.LoopCompletedData)
	if last.Status != client.LoopCompleted || !last.Success || last.TotalIterations != 2 || last.Result == "" || last.TraceID != first.TraceID {
		t.Errorf("loop.completed %+v", last)
	}

	run, err := c.Loop(ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != started.ID || run.Status != client.LoopCompleted || run.Iterations != 2 || run.Result != last.Result ||
		run.TraceID != first.TraceID || len(run.Messages) != 4 || run.FinishedAt == nil || run.CreatedAt.IsZero() ||
		run.Links != want.Links || run.Model != "offline/default" {
		t.Errorf("run %+v", run)
	}
	// The transcript: the prompt, the call, its result, the answer.
	roles := []client.Role{client.RoleUser, client.RoleAssistant, client.RoleUser, client.RoleAssistant}
	types := []string{client.BlockText, client.BlockToolUse, client.BlockToolResult, client.BlockText}
	for i, m := range run.Messages {
		if m.Role != roles[i] || len(m.Content) != 1 || m.Content[0].Type != types[i] {
			t.Errorf("message %d: %+v", i, m)
		}
	}
	if r := run.Messages[2].Content[0]; r.ToolUseID != call.ToolCalls[0].ID || len(r.Content) != 1 {
		t.Errorf("tool result %+v", r)
	}

	err = c.CancelLoop(ctx, started.ID)
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusConflict || p.Type != "https://sampled.dev/problems/loop-finished" {
		t.Errorf("cancelling a finished loop: %v", err)
	}
}

func TestEventsOfAnUnknownLoop(t *testing.T) {
	c := newClient(t)
	evs, err := collect(t, c, "loop_0000000000000000")
	var p *client.Problem
	if len(evs) != 0 || !errors.As(err, &p) || p.Status != http.StatusNotFound {
		t.Errorf("events %v, err %v", evs, err)
	}
	for _, id := range []string{"", ".."} {
		if _, err := collect(t, c, id); err == nil || !strings.Contains(err.Error(), "invalid loop id") {
			t.Errorf("id %q: %v", id, err)
		}
	}
}

func TestEventsStopWhenTheConsumerDoes(t *testing.T) {
	c := newClient(t)
	started, err := c.StartLoop(context.Background(), &calcLoop)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ev, err := range c.Events(context.Background(), started.ID) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; ev.ID != 1 {
			t.Fatalf("first event %d", ev.ID)
		}
		break
	}
	if n != 1 {
		t.Fatalf("%d events", n)
	}
	// goleak (TestMain) checks that the stream's connection was let go.
}

// TestCancelLoop answers like the service does for a running loop, which
// offline loops never are for long enough (they end within a millisecond).
func TestCancelLoop(t *testing.T) {
	var method, path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path = r.Method, r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"id":"loop_a077633ab9059250","status":"cancelling","links":{"self":"/v1/loops/loop_a077633ab9059250","events":"/v1/loops/loop_a077633ab9059250/events"}}`))
	}))
	defer srv.Close()
	c := mustClient(t, srv.URL)
	if err := c.CancelLoop(context.Background(), "loop_a077633ab9059250"); err != nil {
		t.Fatal(err)
	}
	if method != http.MethodDelete || path != "/v1/loops/loop_a077633ab9059250" {
		t.Errorf("%s %s", method, path)
	}
}

// TestListLoops checks the request and the decoding of GET /v1/loops as
// the contract will have it, against a stand-in; TestListLoopsOnTheService
// runs against the service once it serves the route.
func TestListLoops(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/loops" {
			http.NotFound(w, r)
			return
		}
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"loops":[{"id":"loop_b","traceId":"t2","status":"completed","tools":[],"maxIterations":10,"timeoutMs":300000,"iterations":1,"messages":[],"usage":{"inputTokens":1,"outputTokens":2},"createdAt":"2026-11-21T09:07:28Z","links":{"self":"/v1/loops/loop_b","events":"/v1/loops/loop_b/events"}}],"next":"c2"}`))
	}))
	defer srv.Close()
	c := mustClient(t, srv.URL)
	page, err := c.ListLoops(context.Background(), &client.ListLoopsOptions{Status: client.LoopCompleted, Origin: "rest", Limit: 1, Cursor: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if query != "cursor=c1&limit=1&origin=rest&status=completed" {
		t.Errorf("query %q", query)
	}
	if page.Next != "c2" || len(page.Loops) != 1 || page.Loops[0].ID != "loop_b" || page.Loops[0].Usage.OutputTokens != 2 {
		t.Errorf("page %+v", page)
	}
	if _, err := c.ListLoops(context.Background(), nil); err != nil || query != "" {
		t.Errorf("no options: query %q, err %v", query, err)
	}
}

func TestListLoopsOnTheService(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	if _, err := c.ListLoops(ctx, nil); err != nil {
		var p *client.Problem
		if errors.As(err, &p) && p.Status == http.StatusMethodNotAllowed {
			t.Skip("the service does not serve GET /v1/loops yet")
		}
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		started, err := c.StartLoop(ctx, &calcLoop)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, c, started.ID); err != nil {
			t.Fatal(err)
		}
		ids = append([]string{started.ID}, ids...) // newest first
	}
	var got []string
	opts := &client.ListLoopsOptions{Status: client.LoopCompleted, Limit: 2}
	for {
		page, err := c.ListLoops(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Loops) > 2 {
			t.Fatalf("a page of %d runs with limit 2", len(page.Loops))
		}
		for _, r := range page.Loops {
			if r.Status != client.LoopCompleted {
				t.Errorf("run %s has status %s", r.ID, r.Status)
			}
			got = append(got, r.ID)
		}
		if page.Next == "" {
			break
		}
		opts.Cursor = page.Next
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}
