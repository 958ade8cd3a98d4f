package handlers

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// maxStreamBatch bounds the bytes a stream encodes before it writes them.
const maxStreamBatch = 32 << 10

// streamEvents writes a run's events with id > after as SSE, follows live
// events and returns after the terminal event, when the client goes away,
// or when the client fell too far behind (it can resume by id). It reports
// whether it ended because the client went away.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request, id string, after int64) (clientGone bool) {
	sub, err := s.runs.Subscribe(r.Context(), id, after)
	if err != nil {
		s.writeError(w, r, loopError(id, err))
		return r.Context().Err() != nil
	}
	defer sub.Close()
	sess, err := sse.Upgrade(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return false
	}
	// Streams last as long as the loop: no write deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	s.metrics.SSESubscribers.Inc()
	defer s.metrics.SSESubscribers.Dec()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	if err := sess.Flush(); err != nil {
		return true
	}
	// The heartbeat is a plain channel fed by a timer function, not a
	// ticker's channel: a goroutine blocking on a timer channel puts the
	// timer in the runtime's heap and takes it out again on every wake-up,
	// a cost paid per event per subscriber. The client going away needs no
	// case of its own: it ends the subscription, which closes its channel.
	heartbeat := make(chan struct{}, 1)
	beat := time.AfterFunc(s.heartbeat, func() { heartbeat <- struct{}{} })
	defer beat.Stop()
	// Events are encoded into buf and written with one Write: the response
	// writer's per-call costs are paid once per burst, not once per field.
	var buf bytes.Buffer
	for {
		select {
		case ev, ok := <-sub.Events():
			// Encode every event already queued, then write and flush once:
			// a subscriber that fell behind catches up with one write.
			for ok {
				msg := &sse.Message{ID: sse.ID(strconv.FormatInt(ev.ID, 10)), Type: sse.Type(ev.Name)}
				msg.AppendData(string(ev.Data))
				_, _ = msg.WriteTo(&buf) // a bytes.Buffer does not fail
				// A long replay is written in batches: bounded memory.
				if buf.Len() >= maxStreamBatch {
					if _, err := w.Write(buf.Bytes()); err != nil {
						return true
					}
					buf.Reset()
				}
				select {
				case ev, ok = <-sub.Events():
					continue
				default:
				}
				break
			}
			_, err := w.Write(buf.Bytes())
			buf.Reset()
			if err != nil || sess.Flush() != nil {
				return true
			}
			if !ok {
				// Terminal event delivered, dropped as too slow, store
				// closed, or the client went away.
				return r.Context().Err() != nil
			}
		case <-heartbeat:
			hb := &sse.Message{}
			hb.AppendComment("heartbeat")
			if sess.Send(hb) != nil || sess.Flush() != nil {
				return true
			}
			beat.Reset(s.heartbeat)
		}
	}
}
