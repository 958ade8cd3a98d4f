package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/testwait"
	"github.com/sampled/sampled/internal/tools"
)

// loopWait bounds every wait of the loop tests: generous, for -race on a
// busy two-core machine. It is a guard against hangs, not a performance
// bound.
const loopWait = 60 * time.Second

// calcPrompt makes the offline model call std__calculate once, then answer
// in text: 8 events.
const calcPrompt = `{"prompt":"Please calculate 2 * (3 + 4)"}`

// calcEvents are the event names of a calcPrompt run.
var calcEvents = []string{"loop.started", "model.completed", "tool.started", "tool.completed", "iteration.completed",
	"model.completed", "iteration.completed", "loop.completed"}

// script is a provider (model "script/m") that calls test__slow {ms,
// marker} on each of its first `calls` iterations and then answers in text.
// With gate set, every Sample first takes a value from gate (or returns
// when its ctx ends), so a test decides when the loop may go on.
type script struct {
	calls  int
	ms     int
	marker string
	gate   chan struct{}
}

func (p *script) Name() string { return "script" }

func (p *script) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := 0 // iterations so far: one assistant message each
	for _, m := range req.Messages {
		if m.Role == sampler.RoleAssistant {
			n++
		}
	}
	if n >= p.calls {
		return &sampler.Response{Model: "m", Content: []sampler.Content{sampler.TextBlock("done")}, StopReason: sampler.StopEndTurn,
			Usage: sampler.Usage{InputTokens: 1, OutputTokens: 1}}, nil
	}
	args, _ := json.Marshal(map[string]any{"ms": p.ms, "marker": p.marker})
	return &sampler.Response{Model: "m", Content: []sampler.Content{{Type: sampler.BlockToolUse, ID: fmt.Sprintf("call_%d", n+1),
		Name: "test__slow", Input: args}}, StopReason: sampler.StopToolUse, Usage: sampler.Usage{InputTokens: 1, OutputTokens: 1}}, nil
}

// loopEvent is one SSE event as a client sees it.
type loopEvent struct {
	ID, Name, Data string
}

// loopTest is one case's service and client.
type loopTest struct {
	*stack
	t      *testing.T
	client *http.Client
}

// newLoopTest starts a stack for one case. With mcp set, the test MCP
// server runs as server "test" and the stack waits until it is connected.
func newLoopTest(t *testing.T, o stackOptions, mcp string) *loopTest {
	t.Helper()
	if mcp != "" {
		o.servers = map[string]tools.ServerOptions{"test": {Command: mcp}}
	}
	s := startStackWith(t, o)
	// Runs before the stack's cleanup: ending the loops and the
	// subscriptions ends every stream, so that closing the server does not
	// wait for a stream left open by a failed test.
	t.Cleanup(func() {
		s.loops.Close()
		s.runs.Close()
	})
	tr := &http.Transport{MaxIdleConnsPerHost: 200, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	if mcp != "" {
		testwait.Poll(t, 10*time.Millisecond, loopWait, "the test MCP server", func() bool {
			return slices.ContainsFunc(s.tools.Status(), func(st tools.ServerStatus) bool { return st.Name == "test" && st.Connected })
		})
	}
	return &loopTest{stack: s, t: t, client: &http.Client{Transport: tr}}
}

// do sends a request and returns the response; the caller closes its body.
func (lt *loopTest) do(ctx context.Context, method, path, body string, header ...string) *http.Response {
	lt.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, lt.url+path, rd)
	if err != nil {
		lt.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := lt.client.Do(req)
	if err != nil {
		lt.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// json sends a request and returns the status and the decoded JSON answer.
func (lt *loopTest) json(method, path, body string, header ...string) (int, map[string]any) {
	lt.t.Helper()
	resp := lt.do(context.Background(), method, path, body, header...)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		lt.t.Fatalf("%s %s: %d, answer is not JSON: %v: %s", method, path, resp.StatusCode, err, raw)
	}
	return resp.StatusCode, out
}

// start starts a loop without streaming and returns its id.
func (lt *loopTest) start(body string) string {
	lt.t.Helper()
	status, out := lt.json(http.MethodPost, "/v1/loops", body)
	id, _ := out["id"].(string)
	if status != http.StatusCreated || id == "" {
		lt.t.Fatalf("POST /v1/loops: %d %v", status, out)
	}
	return id
}

// status returns the run's status as GET /v1/loops/{id} gives it.
func (lt *loopTest) status(id string) string {
	lt.t.Helper()
	code, out := lt.json(http.MethodGet, "/v1/loops/"+id, "")
	if code != http.StatusOK {
		lt.t.Fatalf("GET /v1/loops/%s: %d %v", id, code, out)
	}
	s, _ := out["status"].(string)
	return s
}

// events opens the run's event stream; header is name, value pairs.
func (lt *loopTest) events(ctx context.Context, id, query string, header ...string) *http.Response {
	lt.t.Helper()
	resp := lt.do(ctx, http.MethodGet, "/v1/loops/"+id+"/events"+query, "", header...)
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lt.t.Fatalf("GET events of %s%s: %d %s", id, query, resp.StatusCode, raw)
	}
	return resp
}

// readEvents reads a stream to its end.
func readEvents(t testing.TB, body io.Reader) []loopEvent {
	t.Helper()
	var out []loopEvent
	for ev, err := range sse.Read(body, &sse.ReadConfig{MaxEventSize: 1 << 20}) {
		if err != nil {
			t.Fatalf("reading the stream after %d events: %v", len(out), err)
		}
		out = append(out, loopEvent{ID: ev.LastEventID, Name: ev.Type, Data: ev.Data})
	}
	return out
}

// log returns the whole event log of a finished run.
// log reads the run's whole log up to loop.completed, resuming by id as a
// client does when its stream is dropped for falling behind.
func (lt *loopTest) log(id string) []loopEvent {
	lt.t.Helper()
	var all []loopEvent
	query := "" // after the first read, ?lastEventId= of the last event read
	for range 1000 {
		resp := lt.events(context.Background(), id, query)
		evs := readEvents(lt.t, resp.Body)
		resp.Body.Close()
		all = append(all, evs...)
		if len(all) > 0 && all[len(all)-1].Name == "loop.completed" {
			return all
		}
		if len(evs) > 0 {
			query = "?lastEventId=" + evs[len(evs)-1].ID
		}
	}
	lt.t.Fatalf("no loop.completed in %d events", len(all))
	return nil
}

func names(evs []loopEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Name
	}
	return out
}

func ids(evs []loopEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// seqIDs returns "from".."to" as strings.
func seqIDs(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// field decodes the member name of an event's JSON data.
func field(t testing.TB, ev loopEvent, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
		t.Fatalf("event %s %s: data is not a JSON object: %v: %s", ev.ID, ev.Name, err, ev.Data)
	}
	return m[name]
}

// eventually polls cond until it holds, failing the test after loopWait.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(loopWait)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %s for %s", loopWait, what)
		}
		<-tick.C
	}
}

// markerIs reports whether the slow tool's marker file holds want.
func markerIs(path, want string) func() bool {
	return func() bool {
		b, err := os.ReadFile(path)
		return err == nil && string(b) == want
	}
}

func TestLoopEvents(t *testing.T) {
	// The test MCP server is built once, when a case first needs it.
	mcpServer := sync.OnceValues(func() (string, error) { return mcptest.BuildServer(t.TempDir()) })
	mcp := func(t *testing.T) string {
		t.Helper()
		bin, err := mcpServer()
		if err != nil {
			t.Fatal(err)
		}
		return bin
	}

	t.Run("streaming POST sends every event and ends after loop.completed", func(t *testing.T) {
		lt := newLoopTest(t, stackOptions{}, "")
		resp := lt.do(context.Background(), http.MethodPost, "/v1/loops", calcPrompt, "Accept", "text/event-stream")
		defer resp.Body.Close()
		if diff := cmp.Diff([]any{200, "text/event-stream"}, []any{resp.StatusCode, resp.Header.Get("Content-Type")}); diff != "" {
			t.Errorf("status, Content-Type (-want +got):\n%s", diff)
		}
		got := readEvents(t, resp.Body)
		if diff := cmp.Diff(calcEvents, names(got)); diff != "" {
			t.Errorf("event names (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(seqIDs(1, len(got)), ids(got)); diff != "" {
			t.Errorf("event ids (-want +got):\n%s", diff)
		}
		if len(got) == 0 {
			t.FailNow()
		}
		last := got[len(got)-1]
		id, _ := field(t, got[0], "id").(string)
		if diff := cmp.Diff([]any{"completed", true, "completed"},
			[]any{field(t, last, "status"), field(t, last, "success"), lt.status(id)}); diff != "" {
			t.Errorf("loop.completed status, success and GET status (-want +got):\n%s", diff)
		}
	})

	t.Run("replay of a finished run starts after Last-Event-ID", func(t *testing.T) {
		lt := newLoopTest(t, stackOptions{}, "")
		id := lt.start(calcPrompt)
		full := lt.log(id) // follows the run to its end
		if diff := cmp.Diff(calcEvents, names(full)); diff != "" {
			t.Fatalf("full log (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(seqIDs(1, len(full)), ids(full)); diff != "" {
			t.Fatalf("full log ids (-want +got):\n%s", diff)
		}
		last := len(full)
		for _, c := range []struct {
			name   string
			after  int
			query  string
			header []string
		}{
			{"header 0", 0, "", []string{"Last-Event-ID", "0"}},
			{"header 1", 1, "", []string{"Last-Event-ID", "1"}},
			{"header 4", 4, "", []string{"Last-Event-ID", "4"}},
			{"header last", last, "", []string{"Last-Event-ID", strconv.Itoa(last)}},
			{"query 3", 3, "?lastEventId=3", nil},
			{"header wins over query", 5, "?lastEventId=2", []string{"Last-Event-ID", "5"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				resp := lt.events(context.Background(), id, c.query, c.header...)
				defer resp.Body.Close()
				if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
					t.Errorf("Content-Type %q", ct)
				}
				got := readEvents(t, resp.Body)
				if diff := cmp.Diff(full[c.after:], got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("events after %d (-want +got):\n%s", c.after, diff)
				}
			})
		}
	})

	t.Run("reconnecting with Last-Event-ID to a running run loses and repeats nothing", func(t *testing.T) {
		const calls = 4 // tool iterations, then a text answer: 5 model calls
		p := &script{calls: calls, ms: 5, marker: filepath.Join(t.TempDir(), "marker"), gate: make(chan struct{}, calls+1)}
		lt := newLoopTest(t, stackOptions{extra: []sampler.Provider{p}}, mcp(t))
		id := lt.start(`{"prompt":"go","model":"script/m"}`)
		var got []loopEvent
		lastID, released, running := "", 0, 0
		for conn := 0; ; conn++ {
			if conn > 100 {
				t.Fatalf("still not at the end after %d connections; got %v", conn, ids(got))
			}
			ctx, cancel := context.WithCancel(context.Background())
			var hdr []string
			if lastID != "" {
				hdr = []string{"Last-Event-ID", lastID}
			}
			resp := lt.events(ctx, id, "", hdr...)
			// The subscription exists now. Let the loop make one more model
			// call per connection, so that the first connections all find
			// it running (each call yields at least two events).
			if released <= calls {
				if lt.status(id) == "running" {
					running++
				}
				p.gate <- struct{}{}
				released++
			}
			n, ended := 0, true
			for ev, err := range sse.Read(resp.Body, nil) {
				if err != nil {
					t.Fatalf("connection %d: %v", conn, err)
				}
				got = append(got, loopEvent{ID: ev.LastEventID, Name: ev.Type, Data: ev.Data})
				lastID = ev.LastEventID
				if n++; n == 2 {
					ended = false
					break
				}
			}
			cancel()
			resp.Body.Close()
			if ended {
				break
			}
		}
		if running < calls+1 {
			t.Errorf("%d connections found the run running, want %d", running, calls+1)
		}
		full := lt.log(id)
		if want := 1 + 4*calls + 3; len(full) != want {
			t.Errorf("the log has %d events, want %d: %v", len(full), want, names(full))
		}
		if diff := cmp.Diff(seqIDs(1, len(full)), ids(full)); diff != "" {
			t.Errorf("log ids (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(full, got); diff != "" {
			t.Errorf("events read over reconnects (-want +got):\n%s", diff)
		}
	})

	t.Run("100 subscribers of one run receive the same events", func(t *testing.T) {
		const subscribers = 100
		p := &script{calls: 2, ms: 1, marker: filepath.Join(t.TempDir(), "marker"), gate: make(chan struct{})}
		lt := newLoopTest(t, stackOptions{extra: []sampler.Provider{p}}, mcp(t))
		id := lt.start(`{"prompt":"go","model":"script/m"}`)
		results := make([][]loopEvent, subscribers)
		errs := make([]error, subscribers)
		var wg sync.WaitGroup
		for i := range subscribers {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, lt.url+"/v1/loops/"+id+"/events", nil)
				resp, err := lt.client.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				defer resp.Body.Close()
				for ev, err := range sse.Read(resp.Body, nil) {
					if err != nil {
						errs[i] = err
						return
					}
					results[i] = append(results[i], loopEvent{ID: ev.LastEventID, Name: ev.Type, Data: ev.Data})
				}
			})
		}
		eventually(t, "100 subscriptions and open streams", func() bool {
			return lt.runs.Subscribers() == subscribers && testutil.ToFloat64(lt.metrics.SSESubscribers) == subscribers
		})
		close(p.gate) // the loop was waiting in its first model call
		wg.Wait()
		full := lt.log(id)
		if want := 1 + 4*2 + 3; len(full) != want {
			t.Errorf("the log has %d events, want %d: %v", len(full), want, names(full))
		}
		for i := range subscribers {
			if errs[i] != nil {
				t.Errorf("subscriber %d: %v", i, errs[i])
				continue
			}
			if diff := cmp.Diff(full, results[i]); diff != "" {
				t.Errorf("subscriber %d (-want +got):\n%s", i, diff)
			}
		}
	})

	t.Run("DELETE while a tool runs cancels the loop and the tool", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "marker")
		p := &script{calls: 1, ms: 600000, marker: marker}
		lt := newLoopTest(t, stackOptions{extra: []sampler.Provider{p}}, mcp(t))
		id := lt.start(`{"prompt":"go","model":"script/m"}`)
		resp := lt.events(context.Background(), id, "")
		defer resp.Body.Close()
		var got []loopEvent
		deleted := false
		for ev, err := range sse.Read(resp.Body, nil) {
			if err != nil {
				t.Fatalf("after %v: %v", names(got), err)
			}
			got = append(got, loopEvent{ID: ev.LastEventID, Name: ev.Type, Data: ev.Data})
			if ev.Type != "tool.started" || deleted {
				continue
			}
			// tool.started comes just before the call: wait until the tool
			// really runs.
			eventually(t, "the slow tool to start", markerIs(marker, "started"))
			code, out := lt.json(http.MethodDelete, "/v1/loops/"+id, "")
			if diff := cmp.Diff([]any{202, id, "cancelling"}, []any{code, out["id"], out["status"]}); diff != "" {
				t.Errorf("DELETE (-want +got):\n%s", diff)
			}
			deleted = true
		}
		if !deleted {
			t.Fatalf("no tool.started in %v", names(got))
		}
		want := []string{"loop.started", "model.completed", "tool.started", "tool.completed", "iteration.completed", "loop.completed"}
		if diff := cmp.Diff(want, names(got)); diff != "" {
			t.Fatalf("events (-want +got):\n%s", diff)
		}
		last := got[len(got)-1]
		if diff := cmp.Diff([]any{"cancelled", false}, []any{field(t, last, "status"), field(t, last, "success")}); diff != "" {
			t.Errorf("loop.completed (-want +got):\n%s", diff)
		}
		eventually(t, `the tool to see its cancellation (marker "cancelled")`, markerIs(marker, "cancelled"))
		if got := lt.status(id); got != "cancelled" {
			t.Errorf("GET status %q, want cancelled", got)
		}
		code, out := lt.json(http.MethodDelete, "/v1/loops/"+id, "")
		if code != http.StatusConflict || !strings.HasSuffix(fmt.Sprint(out["type"]), "loop-finished") {
			t.Errorf("second DELETE: %d %v, want 409 loop-finished", code, out)
		}
	})

	t.Run("DELETE right after the terminal event is 409", func(t *testing.T) {
		// Once a client has read loop.completed, the run is no longer
		// cancellable: the store records that event and the end of the run
		// in one step (runs.Store.Finish).
		lt := newLoopTest(t, stackOptions{}, "")
		for range 20 {
			id := lt.start(calcPrompt)
			lt.log(id) // to its end
			code, out := lt.json(http.MethodDelete, "/v1/loops/"+id, "")
			if code != http.StatusConflict {
				t.Fatalf("DELETE of a finished run: %d %v, want 409", code, out)
			}
		}
	})

	t.Run("a streaming POST client that goes away cancels its loop", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "marker")
		p := &script{calls: 1, ms: 600000, marker: marker}
		lt := newLoopTest(t, stackOptions{extra: []sampler.Provider{p}}, mcp(t))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp := lt.do(ctx, http.MethodPost, "/v1/loops", `{"prompt":"go","model":"script/m"}`, "Accept", "text/event-stream")
		defer resp.Body.Close()
		id := ""
		for ev, err := range sse.Read(resp.Body, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == "loop.started" {
				id, _ = field(t, loopEvent{Data: ev.Data}, "id").(string)
			}
			if ev.Type == "tool.started" {
				break
			}
		}
		if id == "" {
			t.Fatal("no loop.started with an id")
		}
		eventually(t, "the slow tool to start", markerIs(marker, "started"))
		cancel()
		eventually(t, `the tool to see its cancellation (marker "cancelled")`, markerIs(marker, "cancelled"))
		eventually(t, "GET to show the loop cancelled", func() bool { return lt.status(id) == "cancelled" })
	})

	t.Run("a streaming POST client that falls behind can resume: its loop goes on", func(t *testing.T) {
		// The stream of a subscriber that falls more than Buffer events
		// behind ends (runs.ErrSlow) so that it resumes by id; for a
		// streaming POST that must not cancel the loop.
		p := &script{calls: 0, gate: make(chan struct{})}
		lt := newLoopTest(t, stackOptions{extra: []sampler.Provider{p}, runs: memory.Options{Buffer: 2}}, "")
		resp := lt.do(context.Background(), http.MethodPost, "/v1/loops", `{"prompt":"go","model":"script/m"}`, "Accept", "text/event-stream")
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var id string
		for id == "" {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("before loop.started: %v", err)
			}
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				id, _ = field(t, loopEvent{Data: d}, "id").(string)
			}
		}
		// The loop waits in its model call. Fill the connection while the
		// client reads nothing, so that the stream's writes block and its
		// subscription overflows.
		blob, _ := json.Marshal(strings.Repeat("x", 256<<10))
		for range 64 {
			if _, err := lt.runs.Append(context.Background(), id, "filler", blob); err != nil {
				t.Fatalf("%v: the loop ended (%s) when its stream was dropped", err, lt.status(id))
			}
		}
		n, err := io.Copy(io.Discard, br) // the stream ends: dropped as too slow
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		if n >= 64*256<<10 {
			t.Fatalf("the stream carried all %d bytes: the subscription never overflowed, the case tests nothing", n)
		}
		if got := lt.status(id); got != "running" {
			t.Fatalf("after the stream ended the loop is %q, want running", got)
		}
		close(p.gate)
		full := lt.log(id)
		last := full[len(full)-1]
		if diff := cmp.Diff([]any{"loop.completed", "completed"}, []any{last.Name, field(t, last, "status")}); diff != "" {
			t.Errorf("last event (-want +got):\n%s", diff)
		}
	})

	t.Run("heartbeat comments flow while a tool runs", func(t *testing.T) {
		p := &script{calls: 1, ms: 600000, marker: filepath.Join(t.TempDir(), "marker")}
		lt := newLoopTest(t, stackOptions{extra: []sampler.Provider{p}, heartbeat: 20 * time.Millisecond}, mcp(t))
		id := lt.start(`{"prompt":"go","model":"script/m"}`)
		ctx, cancel := context.WithTimeout(context.Background(), loopWait)
		defer cancel()
		resp := lt.events(ctx, id, "")
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		toolStarted := false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("no heartbeat after tool.started (tool started: %v): %v", toolStarted, err)
			}
			if line == "event: tool.started\n" {
				toolStarted = true
			}
			if toolStarted && line == ": heartbeat\n" {
				break
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		lt := newLoopTest(t, stackOptions{}, "")
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/v1/loops/loop_nope"},
			{http.MethodDelete, "/v1/loops/loop_nope"},
			{http.MethodGet, "/v1/loops/loop_nope/events"},
		} {
			resp := lt.do(context.Background(), c.method, c.path, "")
			var p map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&p)
			resp.Body.Close()
			if diff := cmp.Diff([]any{404, "application/problem+json", 404.0, true},
				[]any{resp.StatusCode, resp.Header.Get("Content-Type"), p["status"], strings.HasSuffix(fmt.Sprint(p["type"]), "loop-not-found")}); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", c.method, c.path, diff)
			}
		}
		id := lt.start(calcPrompt)
		lt.log(id)
		for _, c := range []struct {
			query  string
			header []string
		}{
			{"", []string{"Last-Event-ID", "abc"}},
			{"", []string{"Last-Event-ID", "-1"}},
			{"?lastEventId=abc", nil},
		} {
			code, p := lt.json(http.MethodGet, "/v1/loops/"+id+"/events"+c.query, "", c.header...)
			if diff := cmp.Diff([]any{400, []string{"/lastEventId"}}, []any{code, errorPaths(p)}); diff != "" {
				t.Errorf("events%s %v (-want +got):\n%s", c.query, c.header, diff)
			}
		}
		eventually(t, "sampled_sse_subscribers to return to 0", func() bool {
			return testutil.ToFloat64(lt.metrics.SSESubscribers) == 0
		})
	})

	t.Run("a subscriber that goes away frees its subscription", func(t *testing.T) {
		p := &script{calls: 0, gate: make(chan struct{})}
		lt := newLoopTest(t, stackOptions{extra: []sampler.Provider{p}}, "")
		id := lt.start(`{"prompt":"go","model":"script/m"}`)
		ctx, cancel := context.WithCancel(context.Background())
		resp := lt.events(ctx, id, "")
		defer resp.Body.Close()
		for ev, err := range sse.Read(resp.Body, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == "loop.started" {
				break
			}
		}
		if diff := cmp.Diff([]any{1, 1.0}, []any{lt.runs.Subscribers(), testutil.ToFloat64(lt.metrics.SSESubscribers)}); diff != "" {
			t.Errorf("subscriptions, gauge while streaming (-want +got):\n%s", diff)
		}
		cancel()
		eventually(t, "the subscription to end", func() bool {
			return lt.runs.Subscribers() == 0 && testutil.ToFloat64(lt.metrics.SSESubscribers) == 0
		})
		if got := lt.status(id); got != "running" {
			t.Errorf("the loop is %q after a GET subscriber left, want running", got)
		}
		close(p.gate)
		if got := names(lt.log(id)); !slices.Equal(got, []string{"loop.started", "model.completed", "iteration.completed", "loop.completed"}) {
			t.Errorf("log %v", got)
		}
	})
}

// BenchmarkSSEFanout1000 streams the events of one run to 1000 SSE clients
// over loopback HTTP and measures, per event and client, the time from
// Append to the client having parsed the event; and the heap in use (server
// and clients: one process) once all clients are connected. Events are
// published every 20 ms, about the time one event takes to reach all 1000
// clients on two cores, so that the latencies are those of delivery, not
// of a backlog; ns/op is therefore mostly that pacing (50 × 20 ms).
func BenchmarkSSEFanout1000(b *testing.B) {
	const (
		clients = 1000
		events  = 50
	)
	// The service's own part: the time from publish until the event left
	// the service in a write to the subscriber's connection.
	var (
		mu   sync.Mutex
		sent []time.Duration
	)
	listener := func(l net.Listener) net.Listener {
		return sendTimer{Listener: l, record: func(d []time.Duration) {
			mu.Lock()
			sent = append(sent, d...)
			mu.Unlock()
		}}
	}
	s := startStackWith(b, stackOptions{listener: listener})
	b.Cleanup(func() {
		s.loops.Close()
		s.runs.Close()
	})
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConns: clients, MaxIdleConnsPerHost: clients, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	var lat []time.Duration
	var heap uint64
	for i := range b.N {
		b.StopTimer()
		id := fmt.Sprintf("loop_bench_%d", i)
		if err := s.runs.Create(context.Background(), id, json.RawMessage(`{"status":"running"}`)); err != nil {
			b.Fatal(err)
		}
		results := make(chan []time.Duration, clients)
		errc := make(chan error, clients)
		connected := make(chan struct{}, clients)
		dial := make(chan struct{}, 64) // connect at most 64 at a time
		for range clients {
			go func() {
				dial <- struct{}{}
				resp, err := client.Get(s.url + "/v1/loops/" + id + "/events")
				<-dial
				if err != nil {
					errc <- err
					connected <- struct{}{}
					return
				}
				defer resp.Body.Close()
				connected <- struct{}{}
				// A light client: it reads data lines and the publish time
				// in them, so the measure is the service's, not a parser's.
				got := make([]time.Duration, 0, events)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					line := sc.Bytes()
					if !bytes.HasPrefix(line, []byte(`data: {"t":`)) {
						continue
					}
					now := time.Now().UnixNano()
					t, err := strconv.ParseInt(string(bytes.TrimSuffix(line[len(`data: {"t":`):], []byte("}"))), 10, 64)
					if err != nil {
						errc <- err
						return
					}
					got = append(got, time.Duration(now-t))
				}
				results <- got
			}()
		}
		for range clients {
			<-connected
		}
		if n := s.runs.Subscribers(); n != clients {
			b.Fatalf("%d subscribers, want %d (errors: %d)", n, clients, len(errc))
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapInuse)
		b.StartTimer()
		tick := time.NewTicker(20 * time.Millisecond)
		for e := range events {
			<-tick.C
			data := []byte(`{"t":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `}`)
			publish := s.runs.Append
			if e == events-1 {
				publish = func(ctx context.Context, id, name string, data json.RawMessage) (runs.Event, error) {
					return s.runs.Finish(ctx, id, name, data, nil)
				}
			}
			if _, err := publish(context.Background(), id, "bench", data); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		for range clients {
			select {
			case got := <-results:
				if len(got) != events {
					b.Fatalf("a client received %d events, want %d", len(got), events)
				}
				lat = append(lat, got...)
			case err := <-errc:
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	slices.Sort(sent)
	if len(sent) > 0 {
		b.ReportMetric(float64(sent[int(0.50*float64(len(sent)-1))])/float64(time.Millisecond), "sent-p50-ms")
		b.ReportMetric(float64(sent[int(0.99*float64(len(sent)-1))])/float64(time.Millisecond), "sent-p99-ms")
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}

// TestStartLoopBadRequests: a loop that cannot run is refused before it
// starts, with the path of what is wrong.
func TestStartLoopBadRequests(t *testing.T) {
	s := startStack(t, 0)
	tests := []struct{ name, body, path string }{
		{"unknown model", `{"prompt":"hi","model":"nope/x"}`, "/model"},
		{"empty prompt", `{"prompt":""}`, "/prompt"},
		{"maxTokens zero", `{"prompt":"hi","maxTokens":0}`, "/maxTokens"},
		{"temperature too high", `{"prompt":"hi","temperature":7}`, "/temperature"},
		{"maxIterations zero", `{"prompt":"hi","maxIterations":0}`, "/maxIterations"},
		{"timeoutMs zero", `{"prompt":"hi","timeoutMs":0}`, "/timeoutMs"},
		{"bad message", `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "/messages/0/content/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, out := s.post(t, "/v1/loops", tt.body)
			if status != 400 || !contains(errorPaths(out), tt.path) {
				t.Errorf("status %d, paths %v; want 400 naming %s", status, errorPaths(out), tt.path)
			}
		})
	}
}

// TestStreamsOutliveWriteTimeout: a server with write and read timeouts
// still streams a run's events for as long as the run lasts.
func TestStreamsOutliveWriteTimeout(t *testing.T) {
	b := &blocking{started: make(chan struct{}), cancelled: make(chan struct{})}
	s := startStackWith(t, stackOptions{extra: []sampler.Provider{b}, heartbeat: 10 * time.Millisecond,
		writeTimeout: 100 * time.Millisecond, readTimeout: 100 * time.Millisecond})
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/loops", strings.NewReader(`{"prompt":"hi","model":"blocking/m"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-b.started
	start := time.Now()
	br := bufio.NewReader(resp.Body)
	for time.Since(start) < 500*time.Millisecond {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("the stream broke after %s (write and read timeouts 100ms): %v", time.Since(start), err)
		}
	}
}

// sendTimer is a listener whose connections report, after each write, how
// long ago the events in it were published.
type sendTimer struct {
	net.Listener
	record func([]time.Duration)
}

func (l sendTimer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &timedConn{Conn: c, record: l.record}, nil
}

type timedConn struct {
	net.Conn
	record func([]time.Duration)
}

func (c *timedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	now := time.Now().UnixNano()
	var d []time.Duration
	prefix := []byte(`{"t":`) // one write may hold several events
	for rest := p[:n]; ; {
		i := bytes.Index(rest, prefix)
		if i < 0 {
			break
		}
		rest = rest[i+len(prefix):]
		end := bytes.IndexByte(rest, '}')
		if t, err := strconv.ParseInt(string(rest[:max(end, 0)]), 10, 64); err == nil {
			d = append(d, time.Duration(now-t))
		}
	}
	if len(d) > 0 {
		c.record(d)
	}
	return n, err
}

// TestLoopError: each error of a run store has its status and problem type;
// others pass through.
func TestLoopError(t *testing.T) {
	other := errors.New("boom")
	tests := []struct {
		err        error
		wantStatus int
		wantSlug   string
	}{
		{fmt.Errorf("x: %w", runs.ErrNotFound), http.StatusNotFound, "loop-not-found"},
		{fmt.Errorf("x: %w", runs.ErrFinished), http.StatusConflict, "loop-finished"},
		{fmt.Errorf("x: %w", runs.ErrExpired), http.StatusGone, "events-expired"},
		{fmt.Errorf("x: %w", runs.ErrClosed), http.StatusServiceUnavailable, "not-ready"},
		{fmt.Errorf("x: %w", loop.ErrClosed), http.StatusServiceUnavailable, "not-ready"},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			var be *bodyError
			if !errors.As(loopError("loop_x", tt.err), &be) {
				t.Fatalf("loopError(%v) is no bodyError", tt.err)
			}
			if diff := cmp.Diff([]any{tt.wantStatus, tt.wantSlug}, []any{be.status, be.slug}); diff != "" {
				t.Errorf("status, slug (-want +got):\n%s", diff)
			}
		})
	}
	if got := loopError("loop_x", other); got != other {
		t.Errorf("loopError(%v) = %v, want it unchanged", other, got)
	}
}
