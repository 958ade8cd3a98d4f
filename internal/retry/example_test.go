package retry_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sampled/sampled/internal/retry"
)

type unavailable struct{}

func (unavailable) Error() string   { return "upstream: status 503" }
func (unavailable) Retryable() bool { return true }
func (unavailable) Reason() string  { return "server_error" }

func ExampleUpstream_Do() {
	p := retry.Upstream{
		MaxAttempts: 3,
		Rand:        func() float64 { return 0 }, // no wait, for the example
		OnRetry: func(err error, attempt int, delay time.Duration) {
			fmt.Printf("attempt %d failed (%s), retrying in %v\n", attempt, retry.Reason(err), delay)
		},
	}
	calls := 0
	err := p.Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return unavailable{}
		}
		return nil
	})
	fmt.Println(calls, err)
	// Output:
	// attempt 1 failed (server_error), retrying in 0s
	// attempt 2 failed (server_error), retrying in 0s
	// 3 <nil>
}

func ExampleValidation_Attempts() {
	var v retry.Validation
	n, _ := v.Attempts(nil)
	fmt.Println(n)
	_, err := v.Attempts(new(11))
	fmt.Println(err)
	// Output:
	// 3
	// retries must be between 0 and 10
}
