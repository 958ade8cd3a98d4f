package sampler

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrInvalid is matched by every *InvalidError (errors.Is).
var ErrInvalid = errors.New("invalid request")

// InvalidError is a request that cannot be sampled as given. Errors name the
// offending paths as JSON Pointers into the request body.
type InvalidError struct {
	Detail string
	Errors []FieldError
}

// Invalid returns an *InvalidError with one field error.
func Invalid(path, format string, args ...any) *InvalidError {
	msg := fmt.Sprintf(format, args...)
	return &InvalidError{Detail: msg, Errors: []FieldError{{Path: path, Message: msg}}}
}

// InvalidAll returns an *InvalidError listing errs, or nil when there are
// none. Its detail names the first.
func InvalidAll(errs []FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Detail: errs[0].Path + ": " + errs[0].Message, Errors: errs}
}

func (e *InvalidError) Error() string {
	if e.Detail != "" {
		return e.Detail
	}
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Path + ": " + fe.Message
	}
	return strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// UpstreamError is the one typed error of provider calls: a status the
// provider answered with, a timeout or a connection failure. Providers
// return it; the retry policy reads Retryable and RetryAfter; the HTTP layer
// maps it to 502, 503 or 504.
type UpstreamError struct {
	Provider string
	// Model is the configured model ("provider/model") that was called; the
	// Service sets it.
	Model string
	// Status is the upstream HTTP status, 0 when there was no response.
	Status int
	// Timeout is set when the upstream did not answer in time.
	Timeout bool
	// RetryAfter is the upstream's Retry-After, zero when it gave none.
	RetryAfter time.Duration
	// Message is a short, secret-free description.
	Message string
	// Partial is set when the call failed after part of its answer had
	// been streamed to the caller: it is not retried.
	Partial bool
	Err     error
}

func (e *UpstreamError) Error() string {
	var b strings.Builder
	b.WriteString("upstream ")
	b.WriteString(e.Provider)
	switch {
	case e.Timeout:
		b.WriteString(": timeout")
	case e.Status != 0:
		fmt.Fprintf(&b, ": status %d", e.Status)
	default:
		b.WriteString(": no response")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

func (e *UpstreamError) Unwrap() error { return e.Err }

// Retryable reports whether another try may succeed: timeouts, connection
// failures, 408, 429 and 5xx. Other 4xx never are.
func (e *UpstreamError) Retryable() bool {
	switch {
	case e.Partial:
		return false
	case e.Timeout, e.Status == 0:
		return true
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return true
	default:
		return e.Status >= 500
	}
}

// partial marks err, the failure of a call part of whose answer was
// streamed, as not to be retried.
func partial(provider string, err error) error {
	var ue *UpstreamError
	if errors.As(err, &ue) {
		ue.Partial = true
		return err
	}
	return &UpstreamError{Provider: provider, Partial: true, Message: "the stream broke off", Err: err}
}

// RetryAfterHint returns the upstream's Retry-After, if it sent one.
func (e *UpstreamError) RetryAfterHint() (time.Duration, bool) {
	return e.RetryAfter, e.RetryAfter > 0
}

// Reason is a bounded label for metrics: "timeout", "connection",
// "rate_limited", "server_error" or "client_error".
func (e *UpstreamError) Reason() string {
	switch {
	case e.Timeout:
		return "timeout"
	case e.Status == 0:
		return "connection"
	case e.Status == http.StatusTooManyRequests:
		return "rate_limited"
	case e.Status >= 500:
		return "server_error"
	default:
		return "client_error"
	}
}

// ExhaustedError is a guaranteed helper, or Sample in tools mode, that ran
// out of attempts without a valid answer.
type ExhaustedError struct {
	// Method is MethodSchema, MethodTools or MethodSample.
	Method     string
	Attempts   int
	LastResult *Result
	Errors     []FieldError
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("%s: no valid answer after %d attempts", e.Method, e.Attempts)
}
