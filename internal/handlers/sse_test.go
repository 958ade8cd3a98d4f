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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
		data := fmt.Sprintf(`{"i":%d,"pad":%q}`, i+1, strings.Repeat("x", 1<<10))
		if _, err := s.runs.Append(context.Background(), "loop_long", "tool.completed", json.RawMessage(data), i == n-1); err != nil {
			t.Fatal(err)
		}
		want[i] = loopEvent{ID: fmt.Sprint(i + 1), Name: "tool.completed", Data: data}
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

// appendAll creates run id and appends events to it, the last one terminal
// if end; it returns the SSE bytes a stream of them holds.
func appendAll(t *testing.T, s *stack, id string, n int, end bool) string {
	t.Helper()
	if err := s.runs.Create(context.Background(), id, json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range n {
		data := fmt.Sprintf(`{"i":%d}`, i+1)
		if _, err := s.runs.Append(context.Background(), id, "tool.completed", json.RawMessage(data), end && i == n-1); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, "id: %d\nevent: tool.completed\ndata: %s\n\n", i+1, data)
	}
	return want.String()
}

// rawGet sends a GET for path with the protocol version proto on a new
// connection and returns all the server sent until it closed the connection.
func rawGet(t *testing.T, s *stack, path, proto string, header ...string) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET " + path + " " + proto + "\r\nHost: sampled\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(loopWait))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("reading until the server closes: %v (read %q)", err, got)
	}
	return got
}

// TestStreamResponse: an HTTP/1.1 stream, written to its connection by the
// service itself, is a well-formed chunked response with the headers the
// middleware and the stream set; it ends with the last chunk, and the
// connection closes as its head announced. An HTTP/1.0 stream, which has no
// chunks, is written by net/http and carries the same events.
func TestStreamResponse(t *testing.T) {
	s := startStackWith(t, stackOptions{})
	want := appendAll(t, s, "loop_head", 3, true)

	raw := rawGet(t, s, "/v1/loops/loop_head/events?lastEventId=0", "HTTP/1.1", "X-Request-ID", "req-42")
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("response %q: %v", raw, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("chunked body of %q: %v", raw, err)
	}
	_, dateErr := http.ParseTime(resp.Header.Get("Date"))
	if diff := cmp.Diff([]any{"HTTP/1.1 200 OK", "text/event-stream", "no-store", "req-42", []string{"chunked"}, true, true},
		[]any{resp.Proto + " " + resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"),
			resp.Header.Get("X-Request-ID"), resp.TransferEncoding, resp.Close, dateErr == nil}); diff != "" {
		t.Errorf("status line, Content-Type, Cache-Control, X-Request-ID, Transfer-Encoding, Connection: close, Date (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("HTTP/1.1 body (-want +got):\n%s", diff)
	}
	if !bytes.HasSuffix(raw, []byte("\r\n0\r\n\r\n")) {
		t.Errorf("the connection holds more after the last chunk: %q", raw)
	}

	raw = rawGet(t, s, "/v1/loops/loop_head/events", "HTTP/1.0")
	resp, err = http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("response %q: %v", raw, err)
	}
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body of %q: %v", raw, err)
	}
	if diff := cmp.Diff([]any{200, "text/event-stream", []string(nil), want},
		[]any{resp.StatusCode, resp.Header.Get("Content-Type"), resp.TransferEncoding, string(body)}); diff != "" {
		t.Errorf("HTTP/1.0 status, Content-Type, Transfer-Encoding, body (-want +got):\n%s", diff)
	}
}

// TestStreamsWait: at shutdown, once the run store closes, the streams
// write what they hold and end cleanly, and Wait returns when they have.
// Streams still open when Wait's context ends are cut, and so is any
// stream that starts after that.
func TestStreamsWait(t *testing.T) {
	s := startStackWith(t, stackOptions{})
	want := appendAll(t, s, "loop_open", 2, false)
	resp, err := http.Get(s.url + "/v1/loops/loop_open/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	eventually(t, "the subscription", func() bool { return s.runs.Subscribers() == 1 })

	s.runs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), loopWait)
	defer cancel()
	if err := s.streams.Wait(ctx); err != nil {
		t.Fatalf("Wait after the store closed: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("a stream ended by the store closing: %v", err)
	}
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	// A stream whose run stays open past Wait's context is cut.
	s2 := startStackWith(t, stackOptions{})
	appendAll(t, s2, "loop_stuck", 1, false)
	resp2, err := http.Get(s2.url + "/v1/loops/loop_stuck/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	eventually(t, "the subscription", func() bool { return s2.runs.Subscribers() == 1 })
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := s2.streams.Wait(ctx2); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with its context ended = %v, want context.Canceled", err)
	}
	if _, err := io.ReadAll(resp2.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading a cut stream = %v, want io.ErrUnexpectedEOF", err)
	}
	eventually(t, "the subscription to end", func() bool { return s2.runs.Subscribers() == 0 })
	resp3, err := http.Get(s2.url + "/v1/loops/loop_stuck/events")
	if err == nil {
		_, err = io.ReadAll(resp3.Body)
		resp3.Body.Close()
	}
	if err == nil {
		t.Error("a stream started after Wait gave up was not cut")
	}
}

// TestStalledClientIsCut: a client that keeps its connection but stops
// reading holds no stream for long. Once a write to it has waited a whole
// heartbeat interval, the stream ends and frees its subscription; the run
// is not held up meanwhile. Both kinds of stream: written to the hijacked
// connection (HTTP/1.1) and through net/http (HTTP/1.0).
func TestStalledClientIsCut(t *testing.T) {
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
			// Far more than the socket buffers hold; the client reads none
			// of it, and the subscription's buffer is not exceeded.
			pad := strings.Repeat("x", 64<<10)
			for i := range 128 {
				data := json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))
				if _, err := s.runs.Append(context.Background(), "loop_stall", "tool.completed", data, false); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the stalled stream to end", func() bool {
				return s.runs.Subscribers() == 0 && testutil.ToFloat64(s.metrics.SSESubscribers) == 0
			})
		})
	}
}
