package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/console"
	"github.com/sampled/sampled/internal/metrics"
)

// openPath reports whether a path is served without an API key: health,
// readiness, this API's document and, unless Config.MetricsNeedKey says
// otherwise, the metrics; and the web console, whose pages ask for a key
// when the API they call answers 401.
func (s *server) openPath(path string) bool {
	if path == console.Prefix || strings.HasPrefix(path, console.Prefix+"/") {
		return true
	}
	switch path {
	case "/healthz", "/readyz", "/openapi.yaml":
		return true
	case "/metrics":
		return !s.metricsNeedKey
	}
	return false
}

// authenticate admits the requests that carry a configured API key (every
// request when none is configured), puts the caller in the request's
// context and its key's name (never the key) in the log line, and takes
// one request from the key's rate. A request without a valid key gets a
// 401, one past the rate a 429 with Retry-After.
func (s *server) authenticate(next http.Handler) http.Handler {
	if s.guard == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.openPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		c, err := s.guard.Authenticate(r.Header.Get("Authorization"))
		if err != nil {
			challenge, reason := `Bearer realm="sampled"`, metrics.DeniedNoKey
			if errors.Is(err, access.ErrBadKey) {
				challenge, reason = `Bearer realm="sampled", error="invalid_token"`, metrics.DeniedBadKey
			}
			s.metrics.AccessDenied.WithLabelValues(reason).Inc()
			w.Header().Set("WWW-Authenticate", challenge)
			s.writeProblem(w, r, Problem{Type: problemBase + "unauthorized", Title: "Unauthorized", Status: http.StatusUnauthorized,
				Detail: err.Error()})
			return
		}
		// The caller travels in the context: the cost of the upstream
		// calls it causes, loops' included, is counted by its key name.
		if ri := info(r.Context()); ri != nil {
			ri.seat.Set(c)
		} else {
			r = r.WithContext(access.NewContext(r.Context(), c))
		}
		if c.Name() != "" {
			addLog(r.Context(), slog.String("key", c.Name()))
		}
		if ok, wait := s.guard.Allow(r.Context(), c); !ok {
			s.tooMany(w, r, c, metrics.LimitRequests, wait, "this API key sent more requests than its rate per minute allows")
			return
		}
		s.metrics.AccessRequests.WithLabelValues(metrics.KeyLabel(c.Name())).Inc()
		next.ServeHTTP(w, r)
	})
}

// callerOf returns the request's caller; nil when the service has no
// access guard.
func callerOf(ctx context.Context) *access.Caller { return access.FromContext(ctx) }

// ownerOf is the run owner of the request's caller: its key's name, "" for
// the anonymous caller or without a guard.
func ownerOf(ctx context.Context) string { return callerOf(ctx).Name() }

// keyed reports whether runs are owned: API keys are configured.
func (s *server) keyed() bool { return s.guard != nil && s.guard.Enabled() }

// tooMany answers 429 with Retry-After and counts it under the limit
// reached.
func (s *server) tooMany(w http.ResponseWriter, r *http.Request, c *access.Caller, limit string, wait time.Duration, detail string) {
	s.metrics.RateLimited.WithLabelValues(metrics.KeyLabel(c.Name()), limit).Inc()
	s.writeError(w, r, &access.LimitError{Limit: limit, RetryAfter: wait, Detail: detail})
}

// limitSampling caps the sampling requests served at once
// (Config.Access's InFlightSamples); one over the cap gets a 429. A request
// takes its place once its body has been read (readBody): a slow sender
// holds none. The guard's count is what sampled_sampling_in_flight reads
// (newServer).
func (s *server) limitSampling(next http.Handler) http.Handler {
	if s.guard == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := s.readBody(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		// The handler reads the same bytes (readBody), the MCP
		// handler as a body.
		r.Body = newBodyBytes(body)
		release, ok, wait := s.guard.StartSample()
		if !ok {
			s.tooMany(w, r, callerOf(r.Context()), metrics.LimitInFlight, wait, "the service is serving as many sampling requests as it takes at once; try again shortly")
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}
