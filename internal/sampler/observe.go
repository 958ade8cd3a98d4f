package sampler

import (
	"context"
	"errors"
	"time"
)

// Observer is told what a Service does that its callers cannot see: retried
// upstream calls, answers that failed validation, time spent in the Service
// itself. internal/app records it as metrics. Its methods run on the request
// path: they must be cheap and safe for concurrent use.
type Observer interface {
	// UpstreamRetry: a call to provider failed for reason (timeout,
	// connection, rate_limited, server_error, client_error or other) and is
	// tried again.
	UpstreamRetry(provider, reason string)
	// AnswerInvalid: an answer to a guaranteed helper or to Sample in tools
	// mode (method, one of the Method constants) failed
	// validation with kind (one of the Kind constants); retried says whether
	// a corrective retry follows.
	AnswerInvalid(method, kind string, retried bool)
	// Retried: a corrective retry of method follows an answer whose
	// calls used usage (its cost included): what the retry was needed for.
	Retried(method string, usage Usage)
	// Exhausted: a guaranteed helper, or Sample in tools mode, ran out of
	// attempts.
	Exhausted(method string)
	// Overhead: the time a request spent in the Service, provider calls and
	// the waits between their retries excluded.
	Overhead(d time.Duration)
	// Sampled: a request of Sample, SampleSchema or SampleTools ended.
	// caller is its Params.Caller, mode its mode; outcome and modelID are
	// what Outcome says of it. It is told after the request's answer has
	// been sent (AfterAnswer); the other methods as things happen.
	Sampled(caller, mode, modelID, outcome string)
}

// Kinds of answers that fail validation.
const (
	KindInvalidJSON      = "invalid_json"
	KindSchemaMismatch   = "schema_mismatch"
	KindNoToolCall       = "no_tool_call"
	KindUnknownTool      = "unknown_tool"
	KindInvalidArguments = "invalid_arguments"
	// KindToolCallForbidden: a tool call in an answer to toolChoice none.
	KindToolCallForbidden = "tool_call_forbidden"
	// KindWrongTool: a call of another tool than the one toolChoice forces.
	KindWrongTool = "wrong_tool"
)

type nopObserver struct{}

func (nopObserver) UpstreamRetry(string, string)           {}
func (nopObserver) AnswerInvalid(string, string, bool)     {}
func (nopObserver) Retried(string, Usage)                  {}
func (nopObserver) Exhausted(string)                       {}
func (nopObserver) Overhead(time.Duration)                 {}
func (nopObserver) Sampled(string, string, string, string) {}

// Outcomes of a sampling request, as Outcome names them.
const (
	OutcomeOK             = "ok"
	OutcomeParseError     = "parse_error"
	OutcomeInvalidRequest = "invalid_request"
	OutcomeExhausted      = "exhausted"
	OutcomeUpstreamError  = "upstream_error"
	OutcomeCancelled      = "cancelled"
	// OutcomeLimited: the caller's own limits (its tokens per minute or
	// budget) refused the model call; its error has Limited() true.
	OutcomeLimited = "limited"
)

// Limited reports whether err is a refusal by the caller's own limits (its
// tokens per minute or budget): an error in its chain has Limited() true.
// No retry and no other model changes it.
func Limited(err error) bool {
	l := (interface{ Limited() bool })(nil)
	return errors.As(err, &l) && l.Limited()
}

// Outcome says how a sampling request that returned res and err ended, and
// which configured model ("provider/model") answered or failed; modelID is
// empty when no model was called. ctx is the request's context.
func Outcome(ctx context.Context, res *Result, err error) (outcome, modelID string) {
	switch {
	case err == nil && res.ParseError != nil:
		return OutcomeParseError, res.ModelID
	case err == nil:
		return OutcomeOK, res.ModelID
	case errors.Is(err, ErrInvalid):
		return OutcomeInvalidRequest, ""
	}
	// Only now the targets of errors.As, which escape to the heap.
	if Limited(err) {
		return OutcomeLimited, ""
	}
	if ex := (*ExhaustedError)(nil); errors.As(err, &ex) {
		if ex.LastResult != nil {
			return OutcomeExhausted, ex.LastResult.ModelID
		}
		return OutcomeExhausted, ""
	}
	if ctx.Err() != nil {
		return OutcomeCancelled, ""
	}
	if up := (*UpstreamError)(nil); errors.As(err, &up) {
		return OutcomeUpstreamError, up.Model
	}
	return OutcomeUpstreamError, ""
}
