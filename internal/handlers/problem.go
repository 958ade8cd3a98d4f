package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/openaiapi"
	"github.com/sampled/sampled/internal/sampler"
)

// Problem is an RFC 9457 problem document. Extension members are merged in
// by MarshalJSON.
type Problem struct {
	Type     string               `json:"type"`
	Title    string               `json:"title"`
	Status   int                  `json:"status"`
	Detail   string               `json:"detail,omitempty"`
	Instance string               `json:"instance,omitempty"`
	Errors   []sampler.FieldError `json:"errors,omitempty"`
	// Extensions are extra members (e.g. method, attempts, lastResult).
	Extensions map[string]any `json:"-"`
	// retryAfter, when set, is sent as the Retry-After header.
	retryAfter time.Duration
}

// MarshalJSON writes the standard members and the extensions side by side.
func (p Problem) MarshalJSON() ([]byte, error) {
	type plain Problem
	b, err := json.Marshal(plain(p))
	if err != nil || len(p.Extensions) == 0 {
		return b, err
	}
	m := map[string]any{}
	for k, v := range p.Extensions {
		m[k] = v
	}
	var std map[string]json.RawMessage
	if err := json.Unmarshal(b, &std); err != nil {
		return nil, err
	}
	for k, v := range std {
		m[k] = v
	}
	return json.Marshal(m)
}

const problemBase = "https://sampled.dev/problems/"

// problemFor is the one place that maps errors to HTTP statuses.
func problemFor(err error) Problem {
	var (
		inv  *sampler.InvalidError
		exh  *sampler.ExhaustedError
		up   *sampler.UpstreamError
		lim  *access.LimitError
		body *bodyError
	)
	switch {
	case errors.As(err, &body):
		return Problem{Type: problemBase + body.slug, Title: body.title, Status: body.status, Detail: body.detail, Errors: body.errors,
			retryAfter: body.retryAfter}
	case errors.As(err, &inv):
		return Problem{Type: problemBase + "invalid-request", Title: "Invalid request", Status: http.StatusBadRequest,
			Detail: inv.Error(), Errors: inv.Errors}
	case errors.As(err, &exh):
		return Problem{Type: problemBase + "sample-validation-error", Title: "No valid answer within the allowed attempts",
			Status: http.StatusUnprocessableEntity, Detail: exh.Error(), Errors: exh.Errors,
			Extensions: map[string]any{"method": exh.Method, "attempts": exh.Attempts, "lastResult": newResultBody(exh.LastResult)}}
	case errors.As(err, &lim):
		// The caller's tokens per minute or budget refused a model call.
		return Problem{Type: problemBase + "rate-limited", Title: "Too many requests", Status: http.StatusTooManyRequests,
			Detail: lim.Detail, Extensions: map[string]any{"limit": lim.Limit}, retryAfter: lim.RetryAfter}
	case errors.As(err, &up):
		p := Problem{Type: problemBase + "upstream-error", Title: "Upstream provider failed", Status: http.StatusBadGateway,
			Detail: up.Error(), Extensions: map[string]any{"provider": up.Provider}}
		if up.Status != 0 {
			p.Extensions["upstreamStatus"] = up.Status
		}
		switch {
		case up.Timeout:
			p.Type, p.Title, p.Status = problemBase+"upstream-timeout", "Upstream provider timed out", http.StatusGatewayTimeout
		case up.Status == http.StatusTooManyRequests || up.Status == http.StatusServiceUnavailable:
			p.Type, p.Title, p.Status = problemBase+"upstream-unavailable", "Upstream provider unavailable", http.StatusServiceUnavailable
			p.retryAfter = up.RetryAfter
		}
		return p
	case errors.Is(err, context.DeadlineExceeded):
		return Problem{Type: problemBase + "timeout", Title: "Request timed out", Status: http.StatusGatewayTimeout,
			Detail: "the request did not finish within its deadline"}
	default:
		return Problem{Type: problemBase + "internal", Title: "Internal error", Status: http.StatusInternalServerError,
			Detail: "the request failed inside sampled; the log has the details"}
	}
}

// writeError writes err as a problem; internal details go to the log only.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeErrorAs(w, r, err, problemFor)
}

// writeErrorAs writes err as the problem that problem makes of it, for a
// route whose problems differ from problemFor's.
func (s *server) writeErrorAs(w http.ResponseWriter, r *http.Request, err error, problem func(error) Problem) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody reads an answer.
		return
	}
	p := problem(err)
	s.logFailure(r, err, p)
	s.writeProblem(w, r, p)
}

// logFailure logs err, the failure of r, when its problem p is the
// service's or an upstream's (5xx): the client's mistakes are not logged.
func (s *server) logFailure(r *http.Request, err error, p Problem) {
	if p.Status >= 500 {
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed", slog.String("requestId", requestID(r.Context())), slog.String("error", err.Error()))
	}
}

// A problem never echoes megabytes of its request: each text member is cut
// to maxEchoBytes and the errors to maxErrors.
const (
	maxEchoBytes = 256
	maxErrors    = 50
)

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// writeProblem writes p, or, on the paths of OpenAI's dialect, the same
// error in OpenAI's shape, which OpenAI's SDKs read.
func (s *server) writeProblem(w http.ResponseWriter, r *http.Request, p Problem) {
	p.clip(r)
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(access.RetrySeconds(p.retryAfter), 10))
	}
	if strings.HasPrefix(r.URL.Path, openaiPrefix) {
		writeBody(w, p.Status, jsonMediaType, openaiError(p))
		return
	}
	writeBody(w, p.Status, problemMediaType, p)
}

// clip sets the problem's instance, r's path, and cuts what it echoes.
func (p *Problem) clip(r *http.Request) {
	p.Instance = clip(r.URL.Path, maxEchoBytes)
	p.Detail = clip(p.Detail, maxEchoBytes)
	if len(p.Errors) > maxErrors {
		p.Errors = p.Errors[:maxErrors]
	}
	for i, e := range p.Errors {
		p.Errors[i] = sampler.FieldError{Path: clip(e.Path, maxEchoBytes), Message: clip(e.Message, maxEchoBytes)}
	}
}

// openaiPrefix starts the paths of OpenAI's dialect, whose errors take
// OpenAI's shape.
const openaiPrefix = "/openai/"

// openaiError is a problem as OpenAI's error.
func openaiError(p Problem) openaiapi.ErrorResponse {
	return openaiapi.Error(p.Status, strings.TrimPrefix(p.Type, problemBase), p.Detail, p.Errors, p.Extensions)
}

// bodyError is a request that failed before reaching the domain: a body
// that is too large, not JSON, or of the wrong content type.
type bodyError struct {
	status int
	slug   string
	title  string
	detail string
	errors []sampler.FieldError
	// retryAfter, when set, is sent as the Retry-After header.
	retryAfter time.Duration
}

func (e *bodyError) Error() string { return e.detail }
