package client_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/client"
)

// cut says how the cutter ends an event stream: after `after` whole
// events, by aborting the connection ("abort"), by aborting it in the
// middle of the next event ("mid-event"), or by ending the response as if
// the stream were over, between events ("end") or after the lines of the
// next event but before the empty line that ends it ("unterminated": an
// event a client must not dispatch); "503" answers the request with a problem
// and no stream.
type cut struct {
	after int
	how   string
}

// cutter is a reverse proxy in front of the service that cuts the event
// streams it passes on as its plan says, one cut per stream, then lets
// them through whole. It records the Last-Event-ID of each stream request.
type cutter struct {
	service *httptest.Server
	plan    []cut
	proxy   *httputil.ReverseProxy

	mu      sync.Mutex
	lastIDs []string
}

func newCutter(service *httptest.Server, plan ...cut) *cutter {
	u, _ := url.Parse(service.URL)
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = service.Client().Transport
	p.FlushInterval = -1
	return &cutter{service: service, plan: plan, proxy: p}
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") {
		c.proxy.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	n := len(c.lastIDs)
	c.lastIDs = append(c.lastIDs, r.Header.Get("Last-Event-ID"))
	c.mu.Unlock()
	if n >= len(c.plan) {
		c.proxy.ServeHTTP(w, r)
		return
	}
	plan := c.plan[n]
	if plan.how == "503" {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"type":"https://sampled.dev/problems/not-ready","title":"Not ready","status":503,"detail":"the service is shutting down; try again","instance":%q}`, r.URL.Path)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, c.service.URL+r.URL.Path, nil)
	req.Header = r.Header.Clone()
	resp, err := c.service.Client().Do(req)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	br := bufio.NewReader(resp.Body)
	for n := 0; n < plan.after; {
		f := readFrame(br)
		if len(f) == 0 {
			panic(http.ErrAbortHandler) // the service's stream ended
		}
		if bytes.HasPrefix(f, []byte("id:")) {
			n++ // an event, not a heartbeat
		}
		_, _ = w.Write(f)
		_ = rc.Flush()
	}
	switch plan.how {
	case "abort":
		_ = rc.Flush()
		panic(http.ErrAbortHandler)
	case "mid-event":
		f := readFrame(br)
		_, _ = w.Write(f[:len(f)/2])
		_ = rc.Flush()
		panic(http.ErrAbortHandler)
	case "unterminated":
		f := readFrame(br)
		_, _ = w.Write(f[:len(f)-1]) // all but the empty line
	case "end":
	}
}

// readFrame reads one SSE message: lines up to an empty one.
func readFrame(br *bufio.Reader) []byte {
	var f bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		f.Write(line)
		if err != nil || len(bytes.TrimRight(line, "\r\n")) == 0 {
			return f.Bytes()
		}
	}
}

func TestEventsResume(t *testing.T) {
	tests := []struct {
		name    string
		plan    []cut
		lastIDs []string
	}{
		{"aborted between events", []cut{{3, "abort"}}, []string{"", "3"}},
		{"aborted in an event", []cut{{3, "mid-event"}}, []string{"", "3"}},
		{"ended early", []cut{{5, "end"}}, []string{"", "5"}},
		{"ended before an event's end", []cut{{3, "unterminated"}}, []string{"", "3"}},
		{"aborted before any event", []cut{{0, "abort"}}, []string{"", ""}},
		{"unavailable, then cut again and again", []cut{{0, "503"}, {2, "mid-event"}, {1, "end"}, {4, "abort"}}, []string{"", "", "2", "3", "7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := service(t, nil)
			direct := mustClient(t, svc.URL, client.WithHTTPClient(svc.Client()))
			cutter := newCutter(svc, tt.plan...)
			proxy := httptest.NewServer(cutter)
			defer proxy.Close()
			c := mustClient(t, proxy.URL, client.WithHTTPClient(proxy.Client()))

			started, err := c.StartLoop(context.Background(), &calcLoop)
			if err != nil {
				t.Fatal(err)
			}
			got, err := collect(t, c, started.ID)
			if err != nil {
				t.Fatal(err)
			}
			want, err := collect(t, direct, started.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(calcEvents, names(want)); diff != "" {
				t.Fatalf("events read directly (-want +got):\n%s", diff)
			}
			// Every event once, in order, whole, with its data decoded.
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events through the cuts (-direct +cut):\n%s", diff)
			}
			cutter.mu.Lock()
			defer cutter.mu.Unlock()
			if diff := cmp.Diff(tt.lastIDs, cutter.lastIDs); diff != "" {
				t.Errorf("Last-Event-ID of each stream request (-want +got):\n%s", diff)
			}
		})
	}
}

// stream serves the frames as an event stream, then waits for the client
// to go away, closing gone when it has.
func stream(frames string, gone chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(frames))
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		if gone != nil {
			close(gone)
		}
	})
}

func TestEventsRefuseAGap(t *testing.T) {
	srv := httptest.NewServer(stream("id: 1\nevent: loop.started\ndata: {\"id\":\"loop_1\"}\n\nid: 3\nevent: model.completed\ndata: {}\n\n", nil))
	defer srv.Close()
	defer srv.CloseClientConnections()
	c := mustClient(t, srv.URL)
	evs, err := collect(t, c, "loop_1")
	if len(evs) != 1 || !errors.Is(err, client.ErrEventGap) {
		t.Errorf("events %v, err %v", names(evs), err)
	}
}

func TestEventsIgnoreUnknownEvents(t *testing.T) {
	srv := httptest.NewServer(stream(": heartbeat\n\nid: 1\nevent: loop.paused\ndata: {\"why\":\"tea\"}\n\nid: 2\nevent: loop.completed\ndata: {\"status\":\"completed\",\"success\":true}\n\n", nil))
	defer srv.Close()
	defer srv.CloseClientConnections()
	c := mustClient(t, srv.URL)
	evs, err := collect(t, c, "loop_1")
	if err != nil {
		t.Fatal(err)
	}
	want := []client.Event{
		{ID: 1, Name: "loop.paused", Raw: []byte(`{"why":"tea"}`)},
		{ID: 2, Name: client.EventLoopCompleted, Raw: []byte(`{"status":"completed","success":true}`),
			Data: &client.LoopCompletedData{Status: client.LoopCompleted, Success: true}},
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestEventsEndWithTheContext(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(stream("id: 1\nevent: loop.started\ndata: {\"id\":\"loop_1\"}\n\n", gone))
	defer srv.Close()
	c := mustClient(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		evs  []client.Event
		errs []error
	)
	for ev, err := range c.Events(ctx, "loop_1") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		evs = append(evs, ev)
		cancel()
	}
	if len(evs) != 1 || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Errorf("events %v, errors %v", names(evs), errs)
	}
	<-gone // the server saw the client go away
}

// TestEventsDropRepeatedEvents: a server that replays from the start
// despite Last-Event-ID gives no duplicate.
func TestEventsDropRepeatedEvents(t *testing.T) {
	frames := []string{
		"id: 1\nevent: loop.started\ndata: {\"id\":\"loop_1\"}\n\n",
		"id: 2\nevent: iteration.completed\ndata: {\"iteration\":1}\n\n",
		"id: 3\nevent: loop.completed\ndata: {\"status\":\"completed\"}\n\n",
	}
	var conns atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if conns.Add(1) == 1 {
			_, _ = w.Write([]byte(frames[0] + frames[1]))
			_ = http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = w.Write([]byte(strings.Join(frames, "")))
	}))
	defer srv.Close()
	c := mustClient(t, srv.URL)
	evs, err := collect(t, c, "loop_1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	if diff := cmp.Diff([]int64{1, 2, 3}, ids); diff != "" || conns.Load() != 2 {
		t.Errorf("ids (-want +got):\n%s\nafter %d connections", diff, conns.Load())
	}
}

// TestEventsFollowLiveEventsAcrossACut publishes a run's events one at a
// time into the service's run store, each after the client got the one
// before, so that the stream is followed live, and cuts the connection
// after the second: the client resumes and gets the rest, live too.
func TestEventsFollowLiveEventsAcrossACut(t *testing.T) {
	svc, store := serviceApp(t, nil)
	cutter := newCutter(svc, cut{2, "abort"})
	proxy := httptest.NewServer(cutter)
	defer proxy.Close()
	c := mustClient(t, proxy.URL, client.WithHTTPClient(proxy.Client()))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the reader when the test fails early
	id := "loop_00000000000000aa"
	if err := store.Create(ctx, id, []byte(`{"id":"loop_00000000000000aa","status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	got := make(chan client.Event)
	errc := make(chan error, 1)
	go func() {
		defer close(got)
		for ev, err := range c.Events(ctx, id) {
			if err != nil {
				errc <- err
				return
			}
			select {
			case got <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	const n = 6
	for i := 1; i <= n; i++ {
		data := []byte(fmt.Sprintf(`{"traceId":"t","iteration":%d,"toolCalls":[],"durationMs":0}`, i))
		var err error
		if i < n {
			_, err = store.Append(ctx, id, client.EventIterationCompleted, data)
		} else {
			_, err = store.Finish(ctx, id, client.EventLoopCompleted, []byte(`{"traceId":"t","status":"completed","success":true}`), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev, ok := <-got:
			if !ok {
				t.Fatalf("the events ended before event %d: %v", i, <-errc)
			}
			if ev.ID != int64(i) {
				t.Fatalf("event %d has id %d", i, ev.ID)
			}
			if d, ok := ev.Data.(*client.IterationCompletedData); i < n && (!ok || d.Iteration != i) {
				t.Fatalf("event %d: %+v", i, ev.Data)
			}
		case err := <-errc:
			t.Fatal(err)
		}
	}
	if _, more := <-got; more {
		t.Error("an event after loop.completed")
	}
	cutter.mu.Lock()
	defer cutter.mu.Unlock()
	if diff := cmp.Diff([]string{"", "2"}, cutter.lastIDs); diff != "" {
		t.Errorf("Last-Event-ID of each stream request (-want +got):\n%s", diff)
	}
}
