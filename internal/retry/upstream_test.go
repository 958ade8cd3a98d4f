package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testError is an upstream failure like *sampler.UpstreamError: it knows
// its status, whether it is retryable, its Retry-After and its reason.
type testError struct {
	status     int
	retryAfter time.Duration
	reason     string
	err        error
}

func (e *testError) Error() string { return fmt.Sprintf("upstream: status %d", e.status) }
func (e *testError) Unwrap() error { return e.err }

// Retryable: 408, 429 and 5xx, as for *sampler.UpstreamError.
func (e *testError) Retryable() bool {
	return e.status == http.StatusRequestTimeout || e.status == http.StatusTooManyRequests || e.status >= 500
}

func (e *testError) RetryAfterHint() (time.Duration, bool) {
	return e.retryAfter, e.retryAfter > 0
}

func (e *testError) Reason() string { return e.reason }

// negativeHint reports a negative Retry-After, which Delay treats as 0.
type negativeHint struct{ testError }

func (negativeHint) RetryAfterHint() (time.Duration, bool) { return -time.Second, true }

func status(code int) *testError { return &testError{status: code} }

// randSeq returns a Rand that yields vals in order and fails the test if
// asked for more.
func randSeq(t *testing.T, vals ...float64) func() float64 {
	t.Helper()
	return func() float64 {
		if len(vals) == 0 {
			t.Errorf("Rand called more often than expected")
			return 0
		}
		v := vals[0]
		vals = vals[1:]
		return v
	}
}

func constRand(v float64) func() float64 { return func() float64 { return v } }

// retryRecord is one OnRetry call; Status identifies the failed error.
type retryRecord struct {
	Attempt int
	Delay   time.Duration
	Status  int
}

// doOutcome summarises one Do call.
type doOutcome struct {
	Calls   int
	Retries []retryRecord
	Elapsed time.Duration // virtual time, inside a synctest bubble
	// ErrIndex is the index into results of the error Do returned
	// unwrapped (identity), -1 for nil.
	ErrIndex int
}

// runDo runs p.Do with fn returning results in order (the last one
// repeatedly) and reports what happened. It must run inside a synctest
// bubble so Elapsed is exact virtual time.
func runDo(t *testing.T, ctx context.Context, p Upstream, results []error) (doOutcome, error) {
	t.Helper()
	var out doOutcome
	p.OnRetry = func(err error, attempt int, delay time.Duration) {
		var te *testError
		if !errors.As(err, &te) {
			t.Errorf("OnRetry got %v, want a *testError", err)
			return
		}
		out.Retries = append(out.Retries, retryRecord{Attempt: attempt, Delay: delay, Status: te.status})
	}
	start := time.Now()
	err := p.Do(ctx, func(got context.Context) error {
		if got != ctx {
			t.Errorf("fn got a different context than Do")
		}
		i := min(out.Calls, len(results)-1)
		out.Calls++
		return results[i]
	})
	out.Elapsed = time.Since(start)
	out.ErrIndex = -2 // not one of results
	if err == nil {
		out.ErrIndex = -1
	}
	for i, r := range results {
		if r != nil && err == r {
			out.ErrIndex = i
		}
	}
	return out, err
}

func TestUpstreamDo(t *testing.T) {
	e400, e408, e429, e503 := status(400), status(408), status(429), status(503)
	e500, e502 := status(500), status(502)
	plain := errors.New("boom")
	ra3s := &testError{status: 429, retryAfter: 3 * time.Second}
	ra1m := &testError{status: 503, retryAfter: time.Minute}
	ra2m := &testError{status: 503, retryAfter: 2 * time.Minute}
	wrapped503 := fmt.Errorf("call: %w", e503)

	tests := []struct {
		name    string
		policy  func(t *testing.T) Upstream
		results []error
		want    doOutcome
	}{
		{
			name:    "success first try",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: randSeq(t)} },
			results: []error{nil},
			want:    doOutcome{Calls: 1, ErrIndex: -1},
		},
		{
			name: "retryable then success with jittered delays",
			policy: func(t *testing.T) Upstream {
				return Upstream{BaseDelay: 100 * time.Millisecond, Rand: randSeq(t, 0.5, 0.75)}
			},
			results: []error{e503, e429, nil},
			want: doOutcome{
				Calls: 3,
				Retries: []retryRecord{
					{Attempt: 1, Delay: 50 * time.Millisecond, Status: 503},  // 0.5 * 100ms
					{Attempt: 2, Delay: 150 * time.Millisecond, Status: 429}, // 0.75 * 200ms
				},
				Elapsed:  200 * time.Millisecond,
				ErrIndex: -1,
			},
		},
		{
			name:    "zero value uses 250ms base",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: randSeq(t, 0.5, 0.5)} },
			results: []error{e500, e502, nil},
			want: doOutcome{
				Calls: 3,
				Retries: []retryRecord{
					{Attempt: 1, Delay: 125 * time.Millisecond, Status: 500},
					{Attempt: 2, Delay: 250 * time.Millisecond, Status: 502},
				},
				Elapsed:  375 * time.Millisecond,
				ErrIndex: -1,
			},
		},
		{
			name:    "400-like is not retried",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: randSeq(t)} },
			results: []error{e400, nil},
			want:    doOutcome{Calls: 1, ErrIndex: 0},
		},
		{
			name:    "error without Retryable is not retried",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: randSeq(t)} },
			results: []error{plain, nil},
			want:    doOutcome{Calls: 1, ErrIndex: 0},
		},
		{
			name:    "408-like is retried",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: constRand(0)} },
			results: []error{e408, nil},
			want:    doOutcome{Calls: 2, Retries: []retryRecord{{Attempt: 1, Status: 408}}, ErrIndex: -1},
		},
		{
			name:    "429-like is retried",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: constRand(0)} },
			results: []error{e429, nil},
			want:    doOutcome{Calls: 2, Retries: []retryRecord{{Attempt: 1, Status: 429}}, ErrIndex: -1},
		},
		{
			name:    "503-like is retried",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: constRand(0)} },
			results: []error{e503, nil},
			want:    doOutcome{Calls: 2, Retries: []retryRecord{{Attempt: 1, Status: 503}}, ErrIndex: -1},
		},
		{
			name:    "wrapped retryable error is retried",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: constRand(0)} },
			results: []error{wrapped503, nil},
			want:    doOutcome{Calls: 2, Retries: []retryRecord{{Attempt: 1, Status: 503}}, ErrIndex: -1},
		},
		{
			name:    "Retry-After honoured without jitter",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: randSeq(t)} },
			results: []error{ra3s, nil},
			want: doOutcome{
				Calls:    2,
				Retries:  []retryRecord{{Attempt: 1, Delay: 3 * time.Second, Status: 429}},
				Elapsed:  3 * time.Second,
				ErrIndex: -1,
			},
		},
		{
			// The caller gets the 503 and its Retry-After at once.
			name:    "Retry-After beyond RetryAfterCap is not waited for",
			policy:  func(t *testing.T) Upstream { return Upstream{RetryAfterCap: 10 * time.Second, Rand: randSeq(t)} },
			results: []error{ra1m, nil},
			want:    doOutcome{Calls: 1, ErrIndex: 0},
		},
		{
			name:    "Retry-After beyond the default 30s is not waited for",
			policy:  func(t *testing.T) Upstream { return Upstream{Rand: randSeq(t)} },
			results: []error{ra2m, nil},
			want:    doOutcome{Calls: 1, ErrIndex: 0},
		},
		{
			name: "attempts exhausted returns the last error",
			policy: func(t *testing.T) Upstream {
				return Upstream{BaseDelay: time.Second, Rand: randSeq(t, 0.5, 0.5)}
			},
			results: []error{e500, e502, e503},
			want: doOutcome{
				Calls: 3,
				Retries: []retryRecord{
					{Attempt: 1, Delay: 500 * time.Millisecond, Status: 500},
					{Attempt: 2, Delay: time.Second, Status: 502},
				},
				Elapsed:  1500 * time.Millisecond,
				ErrIndex: 2,
			},
		},
		{
			name:    "MaxAttempts 1 disables retries",
			policy:  func(t *testing.T) Upstream { return Upstream{MaxAttempts: 1, Rand: randSeq(t)} },
			results: []error{e503, nil},
			want:    doOutcome{Calls: 1, ErrIndex: 0},
		},
		{
			name: "custom MaxAttempts",
			policy: func(t *testing.T) Upstream {
				return Upstream{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 3 * time.Second, Rand: constRand(0.5)}
			},
			results: []error{e503},
			want: doOutcome{
				Calls: 5,
				Retries: []retryRecord{
					{Attempt: 1, Delay: 500 * time.Millisecond, Status: 503},
					{Attempt: 2, Delay: time.Second, Status: 503},
					{Attempt: 3, Delay: 1500 * time.Millisecond, Status: 503}, // capped at MaxDelay 3s
					{Attempt: 4, Delay: 1500 * time.Millisecond, Status: 503},
				},
				Elapsed:  4500 * time.Millisecond,
				ErrIndex: 0,
			},
		},
		{
			name:    "non-retryable after a retry stops",
			policy:  func(t *testing.T) Upstream { return Upstream{MaxAttempts: 5, Rand: constRand(0)} },
			results: []error{e503, e400, nil},
			want:    doOutcome{Calls: 2, Retries: []retryRecord{{Attempt: 1, Status: 503}}, ErrIndex: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, _ := runDo(t, t.Context(), tt.policy(t), tt.results)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Do outcome mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestUpstreamDoContext(t *testing.T) {
	e503 := status(503)
	tests := []struct {
		name string
		// setup returns the context for Do; it runs inside the bubble.
		setup    func(t *testing.T) context.Context
		policy   Upstream
		results  []error
		want     doOutcome
		wantIs   error
		wantFnAs bool // errors.As finds the *testError
	}{
		{
			name: "cancelled during a wait returns promptly",
			setup: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(time.Second, cancel)
				return ctx
			},
			policy:  Upstream{MaxAttempts: 5, BaseDelay: 10 * time.Second, MaxDelay: time.Minute, Rand: constRand(0.5)},
			results: []error{e503},
			want: doOutcome{
				Calls:    1,
				Retries:  []retryRecord{{Attempt: 1, Delay: 5 * time.Second, Status: 503}},
				Elapsed:  time.Second, // the cancel, not the 5s delay
				ErrIndex: -2,
			},
			wantIs:   context.Canceled,
			wantFnAs: true,
		},
		{
			name: "cancelled during the second wait",
			setup: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(1500*time.Millisecond, cancel)
				return ctx
			},
			policy:  Upstream{MaxAttempts: 5, BaseDelay: time.Second, Rand: constRand(1 - 1e-9)},
			results: []error{e503},
			want: doOutcome{
				Calls: 2,
				Retries: []retryRecord{
					{Attempt: 1, Delay: 999999999, Status: 503},
					{Attempt: 2, Delay: 1999999998, Status: 503},
				},
				Elapsed:  1500 * time.Millisecond,
				ErrIndex: -2,
			},
			wantIs:   context.Canceled,
			wantFnAs: true,
		},
		{
			name: "deadline shorter than the next delay returns immediately",
			setup: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				t.Cleanup(cancel)
				return ctx
			},
			policy:   Upstream{BaseDelay: 10 * time.Second, MaxDelay: time.Minute, Rand: constRand(0.5)},
			results:  []error{e503, nil},
			want:     doOutcome{Calls: 1, ErrIndex: -2},
			wantIs:   context.DeadlineExceeded,
			wantFnAs: true,
		},
		{
			name: "Retry-After beyond the deadline returns immediately",
			setup: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				t.Cleanup(cancel)
				return ctx
			},
			policy:   Upstream{},
			results:  []error{&testError{status: 429, retryAfter: 5 * time.Second}, nil},
			want:     doOutcome{Calls: 1, ErrIndex: -2},
			wantIs:   context.DeadlineExceeded,
			wantFnAs: true,
		},
		{
			name: "deadline longer than the delay waits and retries",
			setup: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
				t.Cleanup(cancel)
				return ctx
			},
			policy:  Upstream{BaseDelay: 10 * time.Second, MaxDelay: time.Minute, Rand: constRand(0.5)},
			results: []error{e503, nil},
			want: doOutcome{
				Calls:    2,
				Retries:  []retryRecord{{Attempt: 1, Delay: 5 * time.Second, Status: 503}},
				Elapsed:  5 * time.Second,
				ErrIndex: -1,
			},
		},
		{
			name: "already cancelled does not call fn",
			setup: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			},
			policy:  Upstream{Rand: constRand(0)},
			results: []error{e503, nil},
			want:    doOutcome{Calls: 0, ErrIndex: -2},
			wantIs:  context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, err := runDo(t, tt.setup(t), tt.policy, tt.results)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Do outcome mismatch (-want +got):\n%s", diff)
				}
				if !errors.Is(err, tt.wantIs) {
					t.Errorf("Do error = %v, want errors.Is %v", err, tt.wantIs)
				}
				var te *testError
				if gotAs := errors.As(err, &te); gotAs != tt.wantFnAs {
					t.Errorf("errors.As(%v, *testError) = %v, want %v", err, gotAs, tt.wantFnAs)
				}
			})
		})
	}
}

// TestUpstreamDoCancelledByFn covers a context that ends while fn runs: no
// wait follows and OnRetry is not called.
func TestUpstreamDoCancelledByFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		e503 := status(503)
		calls, retries := 0, 0
		p := Upstream{
			Rand:    constRand(0.5),
			OnRetry: func(error, int, time.Duration) { retries++ },
		}
		start := time.Now()
		err := p.Do(ctx, func(context.Context) error {
			calls++
			cancel()
			return e503
		})
		got := []any{calls, retries, time.Since(start), errors.Is(err, context.Canceled), errors.As(err, new(*testError))}
		want := []any{1, 0, time.Duration(0), true, true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("calls, retries, elapsed, Is Canceled, As *testError mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestUpstreamDoCancelWhileBlocked cancels from another goroutine once Do is
// durably blocked in its wait.
func TestUpstreamDoCancelWhileBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		e503 := status(503)
		p := Upstream{BaseDelay: time.Hour, MaxDelay: time.Hour, Rand: constRand(0.5)}
		done := make(chan error, 1)
		go func() { done <- p.Do(ctx, func(context.Context) error { return e503 }) }()
		synctest.Wait() // Do is blocked in its 30m wait
		select {
		case err := <-done:
			t.Fatalf("Do returned %v before the cancel", err)
		default:
		}
		start := time.Now()
		cancel()
		err := <-done
		if elapsed := time.Since(start); elapsed != 0 {
			t.Errorf("Do returned %v after the cancel, want at once", elapsed)
		}
		var te *testError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &te) || te != e503 {
			t.Errorf("Do error = %v, want context.Canceled wrapping the fn error", err)
		}
	})
}

func TestUpstreamDelay(t *testing.T) {
	tests := []struct {
		name    string
		policy  Upstream
		attempt int
		err     error
		want    time.Duration
	}{
		{"rand 0 gives 0", Upstream{Rand: constRand(0)}, 1, status(503), 0},
		{"rand 0 at high attempt gives 0", Upstream{Rand: constRand(0)}, 30, status(503), 0},
		{"rand 0.999 attempt 1 just under base", Upstream{Rand: constRand(0.999)}, 1, status(503), 249750000},
		{"rand 0.999 attempt 2", Upstream{Rand: constRand(0.999)}, 2, status(503), 499500000},
		{"rand 0.999 attempt 3", Upstream{Rand: constRand(0.999)}, 3, status(503), 999000000},
		{"rand 0.5 attempt 5 at exponential 4s", Upstream{Rand: constRand(0.5)}, 5, status(503), 2 * time.Second},
		{"rand 0.999 attempt 6 capped at 8s", Upstream{Rand: constRand(0.999)}, 6, status(503), 7992 * time.Millisecond},
		{"rand 0.999 attempt 40 capped at 8s", Upstream{Rand: constRand(0.999)}, 40, status(503), 7992 * time.Millisecond},
		{"huge attempt does not overflow", Upstream{Rand: constRand(0.5)}, math.MaxInt, status(503), 4 * time.Second},
		{"custom base and max", Upstream{BaseDelay: time.Second, MaxDelay: 5 * time.Second, Rand: constRand(0.5)}, 4, status(503), 2500 * time.Millisecond},
		{"max below base caps at max", Upstream{BaseDelay: 10 * time.Second, MaxDelay: 2 * time.Second, Rand: constRand(0.5)}, 1, status(503), time.Second},
		{"attempt 0 counts as 1", Upstream{Rand: constRand(0.5)}, 0, status(503), 125 * time.Millisecond},
		{"rand above range is clamped under 1", Upstream{BaseDelay: time.Second, Rand: constRand(1.5)}, 1, status(503), 999999999},
		{"negative rand is clamped to 0", Upstream{Rand: constRand(-1)}, 3, status(503), 0},
		{"NaN rand is clamped to 0", Upstream{Rand: constRand(math.NaN())}, 3, status(503), 0},
		{"plain error gets jitter", Upstream{Rand: constRand(0.5)}, 1, errors.New("x"), 125 * time.Millisecond},
		{"Retry-After ignores jitter", Upstream{Rand: constRand(0)}, 1, &testError{status: 429, retryAfter: 7 * time.Second}, 7 * time.Second},
		{"Retry-After ignores attempt", Upstream{Rand: constRand(0.999)}, 9, &testError{status: 429, retryAfter: 1500 * time.Millisecond}, 1500 * time.Millisecond},
		{"Retry-After longer than MaxDelay kept", Upstream{Rand: constRand(0)}, 1, &testError{status: 503, retryAfter: 20 * time.Second}, 20 * time.Second},
		{"Retry-After capped", Upstream{RetryAfterCap: 5 * time.Second, Rand: constRand(0)}, 1, &testError{status: 503, retryAfter: 20 * time.Second}, 5 * time.Second},
		{"Retry-After capped at default 30s", Upstream{Rand: constRand(0)}, 1, &testError{status: 503, retryAfter: time.Hour}, 30 * time.Second},
		{"wrapped Retry-After found", Upstream{Rand: constRand(0)}, 1, fmt.Errorf("w: %w", &testError{status: 503, retryAfter: 2 * time.Second}), 2 * time.Second},
		{"negative Retry-After counts as 0", Upstream{BaseDelay: time.Second, RetryAfterCap: time.Minute, Rand: constRand(0.5)}, 1, &negativeHint{testError{status: 503}}, 0},
		{"absent Retry-After hint falls back to jitter", Upstream{Rand: constRand(0.5)}, 2, &testError{status: 503}, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Delay(tt.attempt, tt.err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Delay(%d, %v) mismatch (-want +got):\n%s", tt.attempt, tt.err, diff)
			}
		})
	}
}

// TestUpstreamDelayBounds checks full jitter stays in [0, cap) with the cap
// min(MaxDelay, BaseDelay*2^(attempt-1)) for many attempts.
func TestUpstreamDelayBounds(t *testing.T) {
	for attempt := 1; attempt <= 64; attempt++ {
		capDelay := min(DefaultMaxDelay, DefaultBaseDelay<<min(attempt-1, 20))
		lo := Upstream{Rand: constRand(0)}.Delay(attempt, status(503))
		hi := Upstream{Rand: constRand(0.999)}.Delay(attempt, status(503))
		top := Upstream{Rand: constRand(math.Nextafter(1, 0))}.Delay(attempt, status(503))
		if lo != 0 || hi < capDelay*999/1000-1 || top >= capDelay || top < hi {
			t.Errorf("attempt %d: Delay with Rand 0/0.999/max = %v/%v/%v, want 0 and just under %v", attempt, lo, hi, top, capDelay)
		}
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"context.Canceled", context.Canceled, false},
		{"context.DeadlineExceeded", context.DeadlineExceeded, false},
		{"wrapped context.Canceled", fmt.Errorf("call: %w", context.Canceled), false},
		{"wrapped context.DeadlineExceeded", fmt.Errorf("call: %w", context.DeadlineExceeded), false},
		{"retryable error wrapping Canceled", &testError{status: 503, err: context.Canceled}, false},
		{"joined Canceled and retryable", errors.Join(context.Canceled, status(503)), false},
		{"per-attempt timeout wrapping DeadlineExceeded", &testError{status: 408, err: context.DeadlineExceeded}, true},
		{"plain error", errors.New("boom"), false},
		{"400", status(400), false},
		{"404", status(404), false},
		{"408", status(408), true},
		{"429", status(429), true},
		{"500", status(500), true},
		{"503", status(503), true},
		{"wrapped 503", fmt.Errorf("a: %w", fmt.Errorf("b: %w", status(503))), true},
		{"wrapped 400", fmt.Errorf("a: %w", status(400)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Retryable(tt.err)); diff != "" {
				t.Errorf("Retryable(%v) mismatch (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, time.March, 4, 5, 6, 7, 0, time.UTC)
	type result struct {
		D  time.Duration
		OK bool
	}
	tests := []struct {
		name string
		v    string
		want result
	}{
		{"seconds", "5", result{5 * time.Second, true}},
		{"zero", "0", result{0, true}},
		{"negative", "-1", result{0, false}},
		{"garbage", "abc", result{0, false}},
		{"empty", "", result{0, false}},
		{"blank", "   ", result{0, false}},
		{"surrounding spaces", " 120 ", result{2 * time.Minute, true}},
		{"plus sign", "+5", result{0, false}},
		{"fraction", "1.5", result{0, false}},
		{"digits then junk", "5s", result{0, false}},
		{"huge seconds saturate", "99999999999999999999999", result{time.Duration(math.MaxInt64), true}},
		{"HTTP-date in the future", now.Add(90 * time.Second).Format(http.TimeFormat), result{90 * time.Second, true}},
		{"HTTP-date now", now.Format(http.TimeFormat), result{0, true}},
		{"HTTP-date in the past", now.Add(-time.Hour).Format(http.TimeFormat), result{0, false}},
		{"RFC 850 date in the future", now.Add(time.Minute).Format(time.RFC850), result{time.Minute, true}},
		{"ANSI C date in the future", now.Add(2 * time.Second).Format(time.ANSIC), result{2 * time.Second, true}},
		{"non-GMT zone in the future", now.Add(time.Hour).In(time.FixedZone("CET", 3600)).Format(time.RFC1123), result{0, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseRetryAfter(tt.v, now)
			if diff := cmp.Diff(tt.want, result{d, ok}); diff != "" {
				t.Errorf("ParseRetryAfter(%q) mismatch (-want +got):\n%s", tt.v, diff)
			}
		})
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "other"},
		{"plain", errors.New("boom"), "other"},
		{"context", context.Canceled, "other"},
		{"labelled", &testError{status: 429, reason: "rate_limited"}, "rate_limited"},
		{"wrapped", fmt.Errorf("call: %w", &testError{status: 504, reason: "timeout"}), "timeout"},
		{"empty label", &testError{status: 500}, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Reason(tt.err)); diff != "" {
				t.Errorf("Reason(%v) mismatch (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

// TestUpstreamDoDeadline: Deadline bounds Do as a deadline of its context
// does: not called past it, no wait that would pass it, and a call that
// runs past it is not retried.
func TestUpstreamDoDeadline(t *testing.T) {
	e503 := status(503)
	tests := []struct {
		name      string
		deadline  time.Duration // from the start
		call      time.Duration // each call's duration
		wantCalls int
	}{
		{"already passed", -time.Second, 0, 0},
		{"the wait would pass it", 100 * time.Millisecond, 0, 1},
		{"a call runs past it", time.Second, 2 * time.Second, 1},
		{"room for every attempt", time.Hour, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := Upstream{BaseDelay: time.Second, MaxDelay: time.Second, Rand: constRand(0.5),
					Deadline: time.Now().Add(tt.deadline)}
				calls := 0
				err := p.Do(t.Context(), func(context.Context) error {
					calls++
					time.Sleep(tt.call)
					return e503
				})
				if calls != tt.wantCalls {
					t.Errorf("%d calls, want %d", calls, tt.wantCalls)
				}
				if tt.wantCalls < 3 && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Do error = %v, want context.DeadlineExceeded", err)
				}
				if tt.wantCalls > 0 && !errors.As(err, new(*testError)) {
					t.Errorf("Do error = %v, want the fn error inside", err)
				}
			})
		})
	}
}
