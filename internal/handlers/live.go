package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/sampler"
)

// Events of a streamed sampling answer.
const (
	eventDelta   = "delta"
	eventAttempt = "attempt"
	eventResult  = "result"
	eventError   = "error"
)

// wantsStream reports whether a sampling request asks for its answer as
// an event stream: with "stream": true in its body (given here), or with
// text/event-stream among the media types it accepts.
func wantsStream(r *http.Request, stream bool) bool {
	if stream {
		return true
	}
	for _, v := range r.Header.Values("Accept") {
		if !strings.Contains(v, "text/event-stream") {
			continue // most requests: nothing to parse
		}
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(part); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// eventStream is an event-stream response that starts with its first
// write, so that a request that fails before it is still answered with a
// problem and its status. Its methods run on the handler's goroutine.
type eventStream struct {
	s       *server
	w       http.ResponseWriter
	r       *http.Request
	st      *stream
	started bool
	failed  bool // a write failed: the client is gone or too slow
}

// send writes b, starting the response if it has not started; end says
// that b ends the response.
func (e *eventStream) send(b []byte, end bool) {
	if e.failed {
		return
	}
	if !e.started {
		e.started = true
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		e.w.WriteHeader(http.StatusOK)
		e.st = &stream{w: e.w, rc: http.NewResponseController(e.w), timeout: e.s.heartbeat, http2: e.r.ProtoMajor >= 2}
	}
	if e.st.send(b, end) != nil {
		e.failed = true
	}
}

// live writes a sampling answer as it is made, as server-sent events:
// delta (a fragment), attempt (a guaranteed helper tries again, and why),
// then result or error. The domain calls OnDelta and OnRetry on the
// handler's goroutine.
type live struct {
	eventStream
	// problem is the route's problem for an error; nil means problemFor.
	problem func(error) Problem
}

// stream sets p's callbacks to write its deltas and retries to l.
func (l *live) stream(p *sampler.Params) {
	p.OnDelta = func(d sampler.Delta) { l.event(eventDelta, d) }
	// The domain hands over the corrective turn, then the retry it starts.
	var turn *sampler.Message
	p.OnCorrection = func(_ int, m sampler.Message) { turn = &m }
	p.OnRetry = func(attempt int, errs []sampler.FieldError) {
		l.event(eventAttempt, attemptEvent{Attempt: attempt, Errors: errs, Correction: turn})
		turn = nil
	}
}

// attemptEvent is the data of an attempt event.
type attemptEvent struct {
	Attempt int                  `json:"attempt"`
	Errors  []sampler.FieldError `json:"errors"`
	// Correction is the corrective user turn sent before the attempt.
	Correction *sampler.Message `json:"correction,omitempty"`
}

// event writes one event.
func (l *live) event(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		// Only a value sampled made itself can fail to encode.
		data, name = []byte(`{"title":"Internal error","status":500}`), eventError
	}
	m := sse.Message{Type: sse.Type(name)}
	m.AppendData(string(data))
	b, _ := m.MarshalText()
	l.send(b, name == eventResult || name == eventError)
}

// finish ends the answer: with the result event, or with err as an error
// event, or, when nothing was sent yet, as a problem with its status.
func (l *live) finish(result any, err error) {
	if err == nil {
		l.event(eventResult, result)
		return
	}
	if errors.Is(err, context.Canceled) && l.r.Context().Err() != nil {
		return // the client went away; nobody reads an answer
	}
	p := problemFor(err)
	if l.problem != nil {
		p = l.problem(err)
	}
	l.s.logFailure(l.r, err, p)
	if !l.started {
		l.s.writeProblem(l.w, l.r, p)
		return
	}
	p.clip(l.r)
	l.event(eventError, p)
}
