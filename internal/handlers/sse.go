package handlers

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/runs"
)

// maxStreamBatch bounds the bytes a stream gathers before it writes them.
const maxStreamBatch = 32 << 10

// heartbeatComment is the SSE comment a stream sends when the heartbeat
// interval passes.
var heartbeatComment = func() []byte {
	m := &sse.Message{}
	m.AppendComment("heartbeat")
	b, _ := m.MarshalText()
	return b
}()

// encodeEvent is a run event as an SSE message.
func encodeEvent(ev *runs.Event) []byte {
	m := &sse.Message{ID: sse.ID(strconv.FormatInt(ev.ID, 10)), Type: sse.Type(ev.Name)}
	m.AppendData(string(ev.Data))
	b, _ := m.MarshalText() // an event ID and name from the store are valid
	return b
}

// streamEvents writes a run's events with id > after as SSE, follows live
// events and returns after the terminal event, when the client goes away,
// or when the client fell too far behind (it can resume by id). It reports
// whether it ended because the client went away.
//
// Its loop is what a published event costs per subscriber, so it is lean:
// the event's bytes are encoded once for all subscribers (runs.Event.Wire),
// events already queued are written with one Write, and the loop waits on
// the subscription's channel alone. The heartbeat is written by its timer's
// own goroutine, under the mutex that serializes writes.
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

	var (
		mu     sync.Mutex // serializes writes; guards failed and ended
		failed bool       // a write failed: the client is gone
		ended  bool       // streamEvents is returning: no more writes
	)
	// write writes b and flushes it, unless the stream ends with b: then
	// net/http sends b with the end of the response, in one system call.
	write := func(b []byte, flush bool) bool {
		if _, err := w.Write(b); err != nil || (flush && sess.Flush() != nil) {
			failed = true
		}
		return !failed
	}
	mu.Lock() // the timer's function reads beat
	var beat *time.Timer
	beat = time.AfterFunc(s.heartbeat, func() {
		mu.Lock()
		defer mu.Unlock()
		if ended || failed {
			return
		}
		if !write(heartbeatComment, true) {
			sub.Close() // ends the loop below
			return
		}
		beat.Reset(s.heartbeat)
	})
	mu.Unlock()
	defer func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		beat.Stop()
	}()

	var batch bytes.Buffer
	events := sub.Events()
	for ev := range events {
		b := ev.Wire(encodeEvent)
		// Gather the events already queued (a replay, or a subscriber
		// that fell behind) into one write, in batches of bounded size.
		ok := true
	gather:
		for ok && len(b)+batch.Len() < maxStreamBatch {
			select {
			case next, more := <-events:
				if !more {
					ok = false
					break gather
				}
				batch.Write(b)
				b = next.Wire(encodeEvent)
			default:
				break gather
			}
		}
		if batch.Len() > 0 {
			batch.Write(b)
			b = batch.Bytes()
		}
		mu.Lock()
		sent := write(b, ok)
		mu.Unlock()
		batch.Reset()
		if !sent {
			return true
		}
		if !ok {
			break
		}
	}
	mu.Lock()
	gone := failed
	mu.Unlock()
	// The channel closed: terminal event delivered, dropped as too slow,
	// store closed, the client went away, or a heartbeat failed.
	return gone || r.Context().Err() != nil
}
