package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
)

type ctxKey struct{}

// reqInfo is what the HTTP layer keeps of a request while it is served:
// its id and what handlers add to its log line. It is made once per
// request, with the status writer, by instrument.
type reqInfo struct {
	id    string
	attrs []slog.Attr // starts in buf: one allocation for both
	buf   [8]slog.Attr
	sw    statusWriter
	seat  access.Seat   // the caller, seated by authenticate
	later sampler.Later // what waits for the answer (sampler.AfterAnswer)
}

func info(ctx context.Context) *reqInfo {
	ri, _ := ctx.Value(ctxKey{}).(*reqInfo)
	return ri
}

func requestID(ctx context.Context) string {
	if ri := info(ctx); ri != nil {
		return ri.id
	}
	return ""
}

// addLog adds attributes to the request's log line.
func addLog(ctx context.Context, attrs ...slog.Attr) {
	if ri := info(ctx); ri != nil {
		ri.attrs = append(ri.attrs, attrs...)
	}
}

// requestIDHeader is X-Request-ID in net/http's canonical form: the map is
// read and written with it directly, as Get and Set would canonicalize
// (and allocate) the spelling with "ID" on every request.
const requestIDHeader = "X-Request-Id"

// newRequestID takes a well-formed X-Request-ID from the client or makes
// one.
func newRequestID(r *http.Request) string {
	var id string
	if v := r.Header[requestIDHeader]; len(v) > 0 {
		id = v[0]
	}
	if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	return id
}

func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument gives each request its id (the X-Request-ID response header),
// records request counts and durations by route pattern, and logs each
// request in one line.
func (s *server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{id: newRequestID(r), sw: statusWriter{ResponseWriter: w}}
		ri.attrs = ri.buf[:0]
		w.Header()[requestIDHeader] = []string{ri.id}
		// The caller's trace (traceparent) continues through the request's
		// span, the root of what sampled does for it.
		ctx, span := requestSpan(telemetry.Extract(r.Context(), r.Header), r)
		r = r.WithContext(sampler.WithLater(access.WithSeat(context.WithValue(ctx, ctxKey{}, ri), &ri.seat), &ri.later))
		// A complete answer (writeBody's) has been sent already: what
		// follows is off the client's path.
		next.ServeHTTP(&ri.sw, r)
		ri.later.Run()
		route := s.routeLabel(r)
		status := ri.sw.status
		switch {
		case status == 0 && r.Context().Err() != nil:
			// The client went away before an answer was written: nginx's
			// 499, never the 200 net/http would report.
			status = statusClientClosedRequest
		case status == 0:
			status = http.StatusOK
		}
		endRequestSpan(span, r.Method, route, status)
		d := time.Since(start)
		stream := strings.HasPrefix(ri.sw.Header().Get("Content-Type"), "text/event-stream")
		s.countRequest(route, r.Method, status, d, stream)
		// The log line goes to the handler itself: Logger.LogAttrs would
		// also find the caller's program counter, which nobody reads.
		if h := s.log.Handler(); h.Enabled(r.Context(), slog.LevelInfo) {
			rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
			rec.AddAttrs(slog.String("requestId", ri.id), slog.String("method", r.Method), slog.String("route", route),
				slog.Int("status", status), slog.Float64("durationMs", float64(d.Microseconds())/1000))
			rec.AddAttrs(ri.attrs...)
			_ = h.Handle(r.Context(), rec)
		}
	})
}

// statusClientClosedRequest is the status logged and counted for a request
// whose client went away before its answer (nginx's 499).
const statusClientClosedRequest = 499

// countRequest counts a request and, unless it streamed, observes its
// duration.
func (s *server) countRequest(route, method string, status int, d time.Duration, stream bool) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // bounded label: clients can send any method
	}
	s.metrics.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	if !stream {
		s.metrics.HTTPDuration.WithLabelValues(route, method).Observe(d.Seconds())
	}
}
