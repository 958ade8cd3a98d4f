package handlers

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
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
	st := &stream{w: w, rc: http.NewResponseController(w), timeout: s.heartbeat, http2: r.ProtoMajor >= 2}
	// A stream lasts as long as its run: st replaces the server's write
	// deadline with one per write. (net/http clears the read deadline once
	// the request's body is read.)
	w.WriteHeader(http.StatusOK)
	if st.send(false) != nil {
		return true
	}
	s.metrics.SSESubscribers.Inc()
	defer s.metrics.SSESubscribers.Dec()

	beat := time.NewTicker(s.heartbeat)
	defer beat.Stop()
	wrote := false // since the last tick
	events := sub.Events()
	for {
		select {
		case ev, ok := <-events:
			open := ok
			if ok {
				st.event(ev)
				// Gather the events already queued (a replay, or a
				// subscriber that fell behind) into one write, in
				// batches of bounded size.
			gather:
				for open && st.buf.Len() < maxStreamBatch {
					select {
					case ev, open = <-events:
						if open {
							st.event(ev)
						}
					default:
						break gather
					}
				}
				if st.send(!open) != nil {
					return true
				}
				wrote = true
			}
			if !open {
				// Terminal event delivered, cut as too slow, store
				// closed, or the client went away (ctx ended).
				return ctx.Err() != nil
			}
		case <-beat.C:
			if !wrote {
				st.comment("heartbeat")
				if st.send(false) != nil {
					return true
				}
			}
			wrote = false
		}
	}
}

// stream writes SSE messages to a response.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration // how long a write may wait for the client
	http2   bool
	buf     bytes.Buffer // what the next send writes

	deadline time.Time // the write deadline set last
}

// event adds a run event to the buffer as an SSE message.
func (st *stream) event(ev runs.Event) {
	m := sse.Message{ID: sse.ID(strconv.FormatInt(ev.ID, 10)), Type: sse.Type(ev.Name)}
	m.AppendData(string(ev.Data))
	_, _ = m.WriteTo(&st.buf) // a bytes.Buffer does not fail
}

// comment adds an SSE comment to the buffer.
func (st *stream) comment(text string) {
	var m sse.Message
	m.AppendComment(text)
	_, _ = m.WriteTo(&st.buf)
}

// send writes the buffer and flushes it to the client, unless the stream
// ends with it. A client that accepts none of it for st.timeout (at most
// an eighth more) is cut: the write fails, and so does every later one on
// that response.
//
// Over HTTP/1 the last bytes of a stream are not flushed here: net/http
// writes them with the end of the response, in one system call, under the
// deadline set here, and clears the connection's deadline once the
// response is done. A deadline that passes between writes does nothing
// there, so it is moved only when less than st.timeout is left: most
// writes set none. Over HTTP/2 it would reset the stream, so it is set
// before each write and cleared after it, and every write is flushed.
func (st *stream) send(end bool) error {
	if now := time.Now(); st.http2 || st.deadline.Sub(now) < st.timeout {
		st.deadline = now.Add(st.timeout + st.timeout/8)
		if err := st.rc.SetWriteDeadline(st.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	_, err := st.w.Write(st.buf.Bytes())
	st.buf.Reset()
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
