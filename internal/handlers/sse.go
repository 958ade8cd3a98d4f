package handlers

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/runs"
)

// maxStreamBatch bounds the bytes a stream gathers before it writes them.
const maxStreamBatch = 32 << 10

// streamEvents writes a run's events with id > after as SSE, follows live
// events and returns after the terminal event, when the subscription ends
// otherwise (the subscriber fell too far behind and can resume by id, or
// the run store closed at shutdown), or when the client goes away. It
// reports whether it ended because the client went away, or accepted no
// bytes for a whole heartbeat interval.
//
// The stream goes through net/http's ResponseWriter, so it keeps the
// connection alive and works over HTTP/1 and HTTP/2 alike. Events already
// queued are written with one write and one flush. When nothing was
// written for a heartbeat interval, a comment is.
//
// The loop waits on the subscription alone: the heartbeat is written by
// its timer's goroutine, under the mutex that serializes writes. (A select
// on the events and a timer channel costs the runtime a timer heap update
// at every wake-up: 7 % of a delivery's CPU.)
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request, id string, after int64) (clientGone bool) {
	ctx := r.Context()
	sub, err := s.runs.Subscribe(ctx, id, after)
	if err != nil {
		s.writeError(w, r, loopError(id, err))
		return ctx.Err() != nil
	}
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	// A stream lasts as long as its run: st replaces the server's write
	// deadline with one per write. (net/http clears the read deadline once
	// the request's body is read.)
	st := &stream{w: w, rc: http.NewResponseController(w), timeout: s.heartbeat, http2: r.ProtoMajor >= 2}
	w.WriteHeader(http.StatusOK)
	if st.send(nil, false) != nil {
		return true
	}
	s.metrics.SSESubscribers.Inc()
	defer s.metrics.SSESubscribers.Dec()

	var (
		mu     sync.Mutex // held by a write; guards the fields below
		wrote  bool       // since the heartbeat's last tick
		ended  bool       // the handler returns: no more writes
		failed bool       // a write failed
	)
	var beat *time.Timer
	beat = time.AfterFunc(math.MaxInt64, func() {
		if !mu.TryLock() { // a write is in progress
			beat.Reset(s.heartbeat)
			return
		}
		defer mu.Unlock()
		if ended {
			return
		}
		if !wrote && st.send(heartbeatComment, false) != nil {
			failed = true
			sub.Close() // ends the loop below
			return
		}
		wrote = false
		beat.Reset(s.heartbeat)
	})
	beat.Reset(s.heartbeat)
	defer func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		beat.Stop()
	}()

	var batch bytes.Buffer
	events := sub.Events()
	for ev := range events {
		batch.Write(encodeEvent(ev))
		// Gather the events already queued (a replay, or a subscriber that
		// fell behind) into one write, in batches of bounded size.
		open := true
	gather:
		for open && batch.Len() < maxStreamBatch {
			select {
			case ev, open = <-events:
				if open {
					batch.Write(encodeEvent(ev))
				}
			default:
				break gather
			}
		}
		mu.Lock()
		err := st.send(batch.Bytes(), !open)
		wrote, ended = true, !open || err != nil
		mu.Unlock()
		batch.Reset()
		if err != nil {
			return true
		}
		if !open {
			break
		}
	}
	// Terminal event delivered, cut as too slow, the store closed, the
	// client went away (ctx ended), or a heartbeat failed.
	mu.Lock()
	defer mu.Unlock()
	if !ended && !failed {
		// Nothing left to write: the end of the response goes out within
		// a fresh deadline too.
		_ = st.send(nil, true)
	}
	return failed || ctx.Err() != nil
}

// heartbeatComment is the SSE comment an idle stream sends.
var heartbeatComment = func() []byte {
	var m sse.Message
	m.AppendComment("heartbeat")
	b, _ := m.MarshalText()
	return b
}()

// encodeEvent is a run event as an SSE message.
func encodeEvent(ev runs.Event) []byte {
	m := sse.Message{ID: sse.ID(strconv.FormatInt(ev.ID, 10)), Type: sse.Type(ev.Name)}
	m.AppendData(string(ev.Data))
	b, _ := m.MarshalText() // a bytes.Buffer does not fail
	return b
}

// stream writes to an event stream's response.
type stream struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration // how long a write may wait for the client
	http2    bool
	deadline time.Time // the write deadline set last
}

// send writes b and flushes it to the client, unless the stream ends with
// it. A client that accepts none of it for st.timeout (at most an eighth
// more) is cut: the write fails, and so does every later one on that
// response.
//
// Over HTTP/1 the last bytes of a stream are not flushed here: net/http
// writes them with the end of the response, in one system call, under the
// deadline set here, and clears the connection's deadline once the
// response is done. A deadline that passes between writes does nothing
// there, so it is moved only when less than st.timeout is left: most
// writes set none. Over HTTP/2 it would reset the stream, so it is set
// before each write and cleared after it, and every write is flushed.
func (st *stream) send(b []byte, end bool) error {
	if now := time.Now(); st.http2 || st.deadline.Sub(now) < st.timeout {
		st.deadline = now.Add(st.timeout + st.timeout/8)
		if err := st.rc.SetWriteDeadline(st.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	_, err := st.w.Write(b)
	if err == nil && (!end || st.http2) {
		err = st.rc.Flush()
	}
	if st.http2 {
		if cerr := st.rc.SetWriteDeadline(time.Time{}); err == nil && cerr != nil {
			err = cerr
		}
	}
	return err
}
