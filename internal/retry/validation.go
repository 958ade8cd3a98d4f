package retry

import "fmt"

// Defaults of the zero [Validation].
const (
	DefaultValidationRetries    = 2
	DefaultValidationMaxRetries = 10
)

// Validation bounds the corrective retries of a guaranteed helper
// (/v1/sample/schema, /v1/sample/tools): after an answer fails validation
// the helper asks again, at most retries more times. The zero value is
// usable: DefaultRetries 2, MaxRetries 10.
//
// Since the fields are plain ints, 0 cannot mean "zero retries": 0 means the
// default, and a negative value means 0 (e.g. DefaultRetries: -1 makes
// requests without retries make a single attempt).
type Validation struct {
	// DefaultRetries is used when the request gives none; 0 means 2, a
	// negative value means 0. It is clamped to MaxRetries.
	DefaultRetries int
	// MaxRetries is the largest number of retries a request may ask for;
	// 0 means 10, a negative value means 0.
	MaxRetries int
}

func (v Validation) maxRetries() int {
	switch {
	case v.MaxRetries == 0:
		return DefaultValidationMaxRetries
	case v.MaxRetries < 0:
		return 0
	default:
		return v.MaxRetries
	}
}

func (v Validation) defaultRetries() int {
	switch {
	case v.DefaultRetries == 0:
		return min(DefaultValidationRetries, v.maxRetries())
	case v.DefaultRetries < 0:
		return 0
	default:
		return min(v.DefaultRetries, v.maxRetries())
	}
}

// Attempts returns the total number of attempts (retries+1) for a
// request's retries, or for the default when retries is nil. A negative
// value or one above MaxRetries returns a *[RetriesError], whose message
// states the allowed range, e.g. "retries must be between 0 and 10".
func (v Validation) Attempts(retries *int) (int, error) {
	if retries == nil {
		return v.defaultRetries() + 1, nil
	}
	maxRetries := v.maxRetries()
	if *retries < 0 || *retries > maxRetries {
		return 0, &RetriesError{Retries: *retries, Max: maxRetries}
	}
	return *retries + 1, nil
}

// RetriesError is a request's retries outside [0, Max]. Handlers report it
// as a 400 on the request's "retries" field.
type RetriesError struct {
	// Retries is the value the request gave.
	Retries int
	// Max is the largest value allowed.
	Max int
}

func (e *RetriesError) Error() string {
	return fmt.Sprintf("retries must be between 0 and %d", e.Max)
}
