package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/sampler"
)

// TestLongReplayArrivesWhole: a replay many times larger than one write
// batch reaches the client complete and in order, each event's data intact.
func TestLongReplayArrivesWhole(t *testing.T) {
	s := startStackWith(t, stackOptions{})
	const n = 300 // of 1 KiB each: about ten batches
	if err := s.runs.Create(context.Background(), "loop_long", json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	want := make([]loopEvent, n)
	for i := range n {
		data := json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i+1, strings.Repeat("x", 1<<10)))
		var err error
		if i == n-1 {
			_, err = s.runs.Finish(context.Background(), "loop_long", "tool.completed", data, nil)
		} else {
			_, err = s.runs.Append(context.Background(), "loop_long", "tool.completed", data)
		}
		if err != nil {
			t.Fatal(err)
		}
		want[i] = loopEvent{ID: fmt.Sprint(i + 1), Name: "tool.completed", Data: string(data)}
	}
	resp, err := http.Get(s.url + "/v1/loops/loop_long/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if diff := cmp.Diff(want, readEvents(t, resp.Body)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// appendAll creates run id and appends n events to it, the last one
// terminal if end; it returns the SSE bytes a stream of them holds.
func appendAll(t *testing.T, s *stack, id string, n int, end bool) string {
	t.Helper()
	if err := s.runs.Create(context.Background(), id, json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range n {
		want.WriteString(appendOne(t, s, id, i+1, end && i == n-1))
	}
	return want.String()
}

// appendOne appends event i to run id, the terminal one if end, and
// returns its SSE bytes.
func appendOne(t *testing.T, s *stack, id string, i int, end bool) string {
	t.Helper()
	data := json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
	var err error
	if end {
		_, err = s.runs.Finish(context.Background(), id, "tool.completed", data, nil)
	} else {
		_, err = s.runs.Append(context.Background(), id, "tool.completed", data)
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("id: %d\nevent: tool.completed\ndata: %s\n\n", i, data)
}

// TestStreamResponse: an HTTP/1.1 stream is a chunked response with the
// headers the middleware and the stream set, and the connection stays open
// after it: the next request on it is served. An HTTP/1.0 stream, which has
// no chunks, carries the same events and ends with the connection.
func TestStreamResponse(t *testing.T) {
	const heartbeat = 10 * time.Millisecond
	s := startStackWith(t, stackOptions{heartbeat: heartbeat})
	want := appendAll(t, s, "loop_head", 3, true)

	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(loopWait))
	br := bufio.NewReader(conn)
	get := func(path string, header ...string) *http.Response {
		t.Helper()
		req := "GET " + path + " HTTP/1.1\r\nHost: sampled\r\n"
		for i := 0; i+1 < len(header); i += 2 {
			req += header[i] + ": " + header[i+1] + "\r\n"
		}
		if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp
	}
	resp := get("/v1/loops/loop_head/events?lastEventId=0", "X-Request-ID", "req-42")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("chunked body: %v", err)
	}
	if diff := cmp.Diff([]any{"HTTP/1.1 200 OK", "text/event-stream", "no-store", "req-42", []string{"chunked"}, false},
		[]any{resp.Proto + " " + resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"),
			resp.Header.Get("X-Request-ID"), resp.TransferEncoding, resp.Close}); diff != "" {
		t.Errorf("status line, Content-Type, Cache-Control, X-Request-ID, Transfer-Encoding, Connection: close (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("HTTP/1.1 body (-want +got):\n%s", diff)
	}
	// Kept alive: the same connection serves the next request, also after
	// more than a heartbeat interval (no write deadline left behind), which
	// only time passing shows.
	time.Sleep(5 * heartbeat)
	resp = get("/healthz")
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the next request on the connection: %d, %v", resp.StatusCode, err)
	}

	conn10, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn10.Close()
	if _, err := io.WriteString(conn10, "GET /v1/loops/loop_head/events HTTP/1.0\r\nHost: sampled\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn10.SetReadDeadline(time.Now().Add(loopWait))
	resp, err = http.ReadResponse(bufio.NewReader(conn10), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("HTTP/1.0 body: %v", err)
	}
	if diff := cmp.Diff([]any{200, "text/event-stream", []string(nil), want},
		[]any{resp.StatusCode, resp.Header.Get("Content-Type"), resp.TransferEncoding, string(body)}); diff != "" {
		t.Errorf("HTTP/1.0 status, Content-Type, Transfer-Encoding, body (-want +got):\n%s", diff)
	}
}

// TestStreamHTTP2: over HTTP/2 a stream replays, stays open while its run is
// idle for many heartbeat intervals (sending heartbeats), follows live
// events and ends after the terminal one.
func TestStreamHTTP2(t *testing.T) {
	const heartbeat = 10 * time.Millisecond
	s := startStackWith(t, stackOptions{http2: true, heartbeat: heartbeat})
	want := appendAll(t, s, "loop_h2", 2, false)
	ctx, cancel := context.WithTimeout(context.Background(), loopWait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/loops/loop_h2/events", nil)
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	br := bufio.NewReader(resp.Body)
	var got strings.Builder
	beats := 0
	for beats < 20 { // the replay, then 20 heartbeats: 20 intervals idle
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d heartbeats and %q: %v", beats, got.String(), err)
		}
		switch {
		case line == ": heartbeat\n":
			beats++
			if _, err := br.ReadString('\n'); err != nil { // the comment's blank line
				t.Fatal(err)
			}
		default:
			got.WriteString(line)
		}
	}
	want += appendOne(t, s, "loop_h2", 3, false) + appendOne(t, s, "loop_h2", 4, true)
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %q: %v", got.String(), err)
		}
		if line == ": heartbeat\n" {
			_, _ = br.ReadString('\n')
			continue
		}
		got.WriteString(line)
	}
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestStoreCloseEndsStreams: when the run store closes (at shutdown), a
// stream of a run that goes on ends cleanly after the events it has
// written, over HTTP/1.1 and HTTP/2.
func TestStoreCloseEndsStreams(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			s := startStackWith(t, stackOptions{http2: h2})
			want := appendAll(t, s, "loop_open", 2, false)
			resp, err := s.srv.Client().Get(s.url + "/v1/loops/loop_open/events")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			eventually(t, "the stream", func() bool { return testutil.ToFloat64(s.metrics.SSESubscribers) == 1 })
			_ = s.runs.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("a stream ended by the store closing: %v", err)
			}
			if diff := cmp.Diff(want, string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			// Later streams replay and end at once.
			resp2, err := s.srv.Client().Get(s.url + "/v1/loops/loop_open/events?lastEventId=1")
			if err != nil {
				t.Fatal(err)
			}
			defer resp2.Body.Close()
			body, err = io.ReadAll(resp2.Body)
			if err != nil {
				t.Fatalf("a stream after the store closed: %v", err)
			}
			if diff := cmp.Diff(want[strings.Index(want, "id: 2"):], string(body)); diff != "" {
				t.Errorf("body after the store closed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestShutdownDeliversTerminalEvent: an http.Server shut down while a
// loop's stream is open, wired as cmd/server wires it (the loops and the
// store are told by RegisterOnShutdown), delivers the loop's terminal event
// (cancelled) to the stream, which ends; then Shutdown returns.
func TestShutdownDeliversTerminalEvent(t *testing.T) {
	b := &blocking{started: make(chan struct{}), cancelled: make(chan struct{})}
	s := startStackWith(t, stackOptions{extra: []sampler.Provider{b}})
	srv := &http.Server{Handler: s.srv.Config.Handler, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(func() {
		s.loops.Close()
		_ = s.runs.Close()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/loops", strings.NewReader(`{"prompt":"hi","model":"blocking/m"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-b.started // the loop waits on its model
	ctx, cancel := context.WithTimeout(context.Background(), loopWait)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	var got []string
	last := ""
	for ev, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatalf("the stream broke after %v: %v", got, err)
		}
		got, last = append(got, ev.Type), ev.Data
	}
	var end struct{ Status string }
	_ = json.Unmarshal([]byte(last), &end)
	if diff := cmp.Diff([]any{[]string{"loop.started", "loop.completed"}, "cancelled"}, []any{got, end.Status}); diff != "" {
		t.Errorf("events, terminal status (-want +got):\n%s", diff)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve: %v", err)
	}
}

// TestStalledClientIsCut: a client that keeps its connection but stops
// reading holds no stream for long. Once a write to it has waited a whole
// heartbeat interval, the stream ends and frees its subscription; the run
// is not held up meanwhile. HTTP/1.1, HTTP/1.0 and HTTP/2.
func TestStalledClientIsCut(t *testing.T) {
	// Far more than the socket buffers and HTTP/2's flow-control window
	// hold; the client reads none of it, and the subscription's buffer is
	// not exceeded.
	pad := strings.Repeat("x", 64<<10)
	fill := func(t *testing.T, s *stack) {
		for i := range 128 {
			data := json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))
			if _, err := s.runs.Append(context.Background(), "loop_stall", "tool.completed", data); err != nil {
				t.Fatal(err)
			}
		}
	}
	cut := func(t *testing.T, s *stack) {
		eventually(t, "the stalled stream to end", func() bool {
			return s.runs.Subscribers() == 0 && testutil.ToFloat64(s.metrics.SSESubscribers) == 0
		})
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run(proto, func(t *testing.T) {
			s := startStackWith(t, stackOptions{heartbeat: 20 * time.Millisecond})
			if err := s.runs.Create(context.Background(), "loop_stall", json.RawMessage(`{"status":"running"}`)); err != nil {
				t.Fatal(err)
			}
			d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
				var err error
				_ = c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
				return err
			}}
			conn, err := d.Dial("tcp", s.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "GET /v1/loops/loop_stall/events "+proto+"\r\nHost: sampled\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the subscription", func() bool { return s.runs.Subscribers() == 1 })
			fill(t, s)
			cut(t, s)
		})
	}
	t.Run("HTTP/2", func(t *testing.T) {
		s := startStackWith(t, stackOptions{http2: true, heartbeat: 20 * time.Millisecond})
		if err := s.runs.Create(context.Background(), "loop_stall", json.RawMessage(`{"status":"running"}`)); err != nil {
			t.Fatal(err)
		}
		resp, err := s.srv.Client().Get(s.url + "/v1/loops/loop_stall/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
		}
		eventually(t, "the subscription", func() bool { return s.runs.Subscribers() == 1 })
		fill(t, s)
		cut(t, s)
	})
}
