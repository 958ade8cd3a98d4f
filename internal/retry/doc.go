// Package retry holds the retry policies of sampled: [Upstream], which
// retries one upstream provider call on transient failures with exponential
// backoff and full jitter (honouring the upstream's Retry-After), and
// [Validation], which bounds the corrective retries of the guaranteed helpers
// /v1/sample/schema and /v1/sample/tools.
//
// The package imports no other package of sampled (they import it). It
// classifies errors only through small interfaces, found with [errors.As]
// through any wrapping:
//
//	interface{ Retryable() bool }                        // may another try succeed?
//	interface{ RetryAfterHint() (time.Duration, bool) }  // the upstream's Retry-After
//	interface{ Reason() string }                         // a bounded metrics label
//
// The gateway's *sampler.UpstreamError implements all three.
package retry
