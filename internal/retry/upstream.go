package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of the zero [Upstream].
const (
	DefaultMaxAttempts   = 3
	DefaultBaseDelay     = 250 * time.Millisecond
	DefaultMaxDelay      = 8 * time.Second
	DefaultRetryAfterCap = 30 * time.Second
)

// Upstream retries one upstream call on retryable failures with exponential
// backoff and full jitter. The zero value is usable: MaxAttempts 3,
// BaseDelay 250ms, MaxDelay 8s, RetryAfterCap 30s. An Upstream is a value
// with no state of its own; it is safe for concurrent use if Rand and
// OnRetry are.
type Upstream struct {
	// MaxAttempts is the total number of tries including the first; 0 (or
	// a negative value) means 3; 1 disables retries.
	MaxAttempts int
	// BaseDelay is the backoff cap of the first retry; 0 (or negative)
	// means 250ms. It doubles with each further attempt.
	BaseDelay time.Duration
	// MaxDelay caps the exponential backoff; 0 (or negative) means 8s.
	MaxDelay time.Duration
	// RetryAfterCap is the longest Retry-After Do waits: an upstream that
	// asks for a longer wait is not retried, so that its error, hint
	// included, reaches the caller at once; 0 (or negative) means 30s.
	RetryAfterCap time.Duration
	// Rand returns a number in [0,1) for the jitter; nil means
	// math/rand/v2's Float64. Values outside [0,1) are clamped into it.
	Rand func() float64
	// OnRetry, if set, is called before each wait with the failed error,
	// the attempt that failed (1-based) and the delay about to be waited.
	// It is not called when no wait follows (success, non-retryable error,
	// attempts exhausted, or the context ends or would end first).
	OnRetry func(err error, attempt int, delay time.Duration)
	// Deadline, when not zero, bounds Do as a deadline of its context
	// does, without a context of its own: past it Do calls fn no more and
	// waits for nothing.
	Deadline time.Time
}

// deadline returns the earlier of ctx's deadline and Deadline.
func (p Upstream) deadline(ctx context.Context) (time.Time, bool) {
	d, ok := ctx.Deadline()
	if !p.Deadline.IsZero() && (!ok || p.Deadline.Before(d)) {
		return p.Deadline, true
	}
	return d, ok
}

// expired returns ctx.Err(), or context.DeadlineExceeded once Deadline
// has passed.
func (p Upstream) expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !p.Deadline.IsZero() && !time.Now().Before(p.Deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (p Upstream) maxAttempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

func (p Upstream) baseDelay() time.Duration {
	if p.BaseDelay <= 0 {
		return DefaultBaseDelay
	}
	return p.BaseDelay
}

func (p Upstream) maxDelay() time.Duration {
	if p.MaxDelay <= 0 {
		return DefaultMaxDelay
	}
	return p.MaxDelay
}

func (p Upstream) retryAfterCap() time.Duration {
	if p.RetryAfterCap <= 0 {
		return DefaultRetryAfterCap
	}
	return p.RetryAfterCap
}

func (p Upstream) rand() float64 {
	r := rand.Float64()
	if p.Rand != nil {
		r = p.Rand()
	}
	switch {
	case !(r >= 0): // negative or NaN
		return 0
	case r >= 1:
		return math.Nextafter(1, 0)
	default:
		return r
	}
}

// Do calls fn until it succeeds, fails with an error that is not
// [Retryable], the attempts run out or ctx ends. fn receives ctx unchanged.
//
// It returns nil on success, and fn's last error, not wrapped, when that
// error is not retryable or the attempts ran out. When ctx ends before or
// during a wait between attempts it returns fn's last error wrapped with
// ctx.Err(), so that both errors.Is(err, ctx.Err()) and errors.As for fn's
// error type hold. If ctx has a deadline that would pass before the next
// wait ends, Do does not wait at all: it returns at once, wrapping fn's
// last error with [context.DeadlineExceeded]. If ctx is already done when
// Do is called, fn is not called and ctx.Err() is returned. Deadline counts
// as a deadline of ctx in all of this.
func (p Upstream) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := p.expired(ctx); err != nil {
		return err
	}
	maxAttempts := p.maxAttempts()
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if attempt >= maxAttempts || !Retryable(err) {
			return err
		}
		if cerr := p.expired(ctx); cerr != nil {
			return interrupted(cerr, attempt, err)
		}
		if hint, ok := retryAfter(err); ok && hint > p.retryAfterCap() {
			return err
		}
		delay := p.Delay(attempt, err)
		if deadline, ok := p.deadline(ctx); ok && !time.Now().Add(delay).Before(deadline) {
			return interrupted(context.DeadlineExceeded, attempt, err)
		}
		if p.OnRetry != nil {
			p.OnRetry(err, attempt, delay)
		}
		if cerr := Sleep(ctx, delay); cerr != nil {
			return interrupted(cerr, attempt, err)
		}
	}
}

// Sleep blocks for d or until ctx ends, whichever is first, and returns
// ctx.Err() if ctx ended: the wait between two tries, for every retry
// loop of the service.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// interrupted wraps fn's last error with the context error that stopped
// the retries; both stay reachable with errors.Is and errors.As.
func interrupted(ctxErr error, attempt int, last error) error {
	return fmt.Errorf("%w: retry stopped after attempt %d: %w", ctxErr, attempt, last)
}

// Delay returns the wait before the next try after attempt (1-based)
// failed with err. If err carries a Retry-After hint
// (RetryAfterHint() (time.Duration, bool), found with errors.As), the delay
// is that hint, capped at RetryAfterCap, without jitter (a negative hint
// counts as 0). Otherwise it is full jitter:
// Rand() * min(MaxDelay, BaseDelay * 2^(attempt-1)); an attempt below 1
// counts as 1.
func (p Upstream) Delay(attempt int, err error) time.Duration {
	if d, ok := retryAfter(err); ok {
		return min(max(d, 0), p.retryAfterCap())
	}
	return time.Duration(p.rand() * float64(p.backoff(attempt)))
}

// retryAfter returns the Retry-After hint of err, if it carries one.
func retryAfter(err error) (time.Duration, bool) {
	var h interface {
		RetryAfterHint() (time.Duration, bool)
	}
	if errors.As(err, &h) {
		return h.RetryAfterHint()
	}
	return 0, false
}

// backoff returns min(MaxDelay, BaseDelay * 2^(attempt-1)) without
// overflowing.
func (p Upstream) backoff(attempt int) time.Duration {
	limit := p.maxDelay()
	d := min(p.baseDelay(), limit)
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return d
}

// Retryable reports whether err may succeed on another try. It is false
// for nil and for any error whose chain holds [context.Canceled] (a
// cancellation is deliberate and never retried). Otherwise, if an error in
// err's chain has a Retryable() bool method (found with errors.As), its
// answer is used: a provider may report its own per-attempt timeout that
// way even when it wraps [context.DeadlineExceeded]. Anything else,
// including a bare [context.DeadlineExceeded] (the caller's deadline), is
// not retryable.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		return r.Retryable()
	}
	return false
}

// ParseRetryAfter parses a Retry-After header value, either delay-seconds
// (ASCII digits only) or an HTTP-date, which is taken relative to now. It
// returns ok=false if v is empty, malformed or negative (including a date
// before now). Seconds too large for a time.Duration saturate at its
// maximum; callers cap the result anyway.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(math.MaxInt64/time.Second) {
			// Only a range error is possible here: saturate.
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, false
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Reason returns the bounded metrics label of err: the Reason() string of
// the first error in its chain that has one (errors.As), or "other" when
// none does, it is empty, or err is nil.
func Reason(err error) string {
	var r interface{ Reason() string }
	if errors.As(err, &r) {
		if s := r.Reason(); s != "" {
			return s
		}
	}
	return "other"
}
