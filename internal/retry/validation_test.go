package retry

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidationAttempts(t *testing.T) {
	type result struct {
		Attempts int
		Err      string
	}
	tests := []struct {
		name    string
		v       Validation
		retries *int
		want    result
	}{
		{"nil uses default 2", Validation{}, nil, result{Attempts: 3}},
		{"zero retries", Validation{}, new(0), result{Attempts: 1}},
		{"two retries", Validation{}, new(2), result{Attempts: 3}},
		{"max retries", Validation{}, new(10), result{Attempts: 11}},
		{"above max", Validation{}, new(11), result{Err: "retries must be between 0 and 10"}},
		{"negative", Validation{}, new(-1), result{Err: "retries must be between 0 and 10"}},
		{"custom default", Validation{DefaultRetries: 5, MaxRetries: 20}, nil, result{Attempts: 6}},
		{"custom max allowed", Validation{DefaultRetries: 5, MaxRetries: 20}, new(20), result{Attempts: 21}},
		{"custom max exceeded", Validation{DefaultRetries: 5, MaxRetries: 20}, new(21), result{Err: "retries must be between 0 and 20"}},
		{"custom max with zero default", Validation{MaxRetries: 4}, nil, result{Attempts: 3}},
		{"custom max below default 2", Validation{MaxRetries: 1}, nil, result{Attempts: 2}},
		{"default above max is clamped", Validation{DefaultRetries: 7, MaxRetries: 3}, nil, result{Attempts: 4}},
		{"negative default means no retries", Validation{DefaultRetries: -1}, nil, result{Attempts: 1}},
		{"negative default still allows explicit", Validation{DefaultRetries: -1}, new(4), result{Attempts: 5}},
		{"negative max disables retries", Validation{MaxRetries: -1}, nil, result{Attempts: 1}},
		{"negative max rejects any retry", Validation{MaxRetries: -1}, new(1), result{Err: "retries must be between 0 and 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := tt.v.Attempts(tt.retries)
			got := result{Attempts: n}
			if err != nil {
				got.Err = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%+v.Attempts(%s) mismatch (-want +got):\n%s", tt.v, show(tt.retries), diff)
			}
			if err != nil {
				var re *RetriesError
				if !errors.As(err, &re) || re.Retries != *tt.retries {
					t.Errorf("Attempts error %v is not a *RetriesError for %d", err, *tt.retries)
				}
			}
		})
	}
}

func show(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
