package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(part); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// live writes a sampling answer as it is made, as server-sent events:
// delta (a fragment), attempt (a guaranteed helper tries again, and why),
// then result or error. The response starts with the first event: a
// request that fails before any (an invalid one, say) is answered with a
// problem and its status, as without streaming. Its methods run on the
// handler's goroutine: the domain calls OnDelta and OnRetry there.
type live struct {
	s *server
	w http.ResponseWriter
	r *http.Request
	// problem is the route's problem for an error; nil means problemFor.
	problem func(error) Problem
	st      *stream
	failed  bool // a write failed: the client is gone or too slow
	started bool
}

// stream sets p's callbacks to write its deltas and retries to l.
func (l *live) stream(p *sampler.Params) {
	p.OnDelta = func(d sampler.Delta) { l.event(eventDelta, d) }
	p.OnRetry = func(attempt int, errs []sampler.FieldError) {
		l.event(eventAttempt, attemptEvent{Attempt: attempt, Errors: errs})
	}
}

// attemptEvent is the data of an attempt event.
type attemptEvent struct {
	Attempt int                  `json:"attempt"`
	Errors  []sampler.FieldError `json:"errors"`
}

// event writes one event, starting the response if it has not started.
func (l *live) event(name string, v any) {
	if l.failed {
		return
	}
	if !l.started {
		l.started = true
		h := l.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		l.w.WriteHeader(http.StatusOK)
		l.st = &stream{w: l.w, rc: http.NewResponseController(l.w), timeout: l.s.heartbeat, http2: l.r.ProtoMajor >= 2}
	}
	data, err := json.Marshal(v)
	if err != nil {
		// Only a value sampled made itself can fail to encode.
		data, name = []byte(`{"title":"Internal error","status":500}`), eventError
	}
	m := sse.Message{Type: sse.Type(name)}
	m.AppendData(string(data))
	b, _ := m.MarshalText()
	end := name == eventResult || name == eventError
	if l.st.send(b, end) != nil {
		l.failed = true
	}
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
	if p.Status >= 500 {
		l.s.log.LogAttrs(l.r.Context(), slog.LevelError, "request failed", slog.String("requestId", requestID(l.r.Context())), slog.String("error", err.Error()))
	}
	if !l.started {
		l.s.writeProblem(l.w, l.r, p)
		return
	}
	p.Instance = clip(l.r.URL.Path, maxEchoBytes)
	p.Detail = clip(p.Detail, maxEchoBytes)
	l.event(eventError, p)
}
