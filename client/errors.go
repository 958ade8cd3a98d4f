package client

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FieldError is one error at a JSON Pointer path: of the request body in a
// Problem, of the model's answer in a ValidationError.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Problem is an RFC 9457 problem document: the answer of every request the
// service refused or failed. Type is a URI naming the kind of problem
// (https://sampled.dev/problems/ followed by invalid-request,
// loop-not-found, loop-finished, upstream-unavailable, …; see
// api/openapi.yaml). When an answer with an error status is not a problem
// document (a proxy's error page, say), Problem holds its status, the
// status text as Title, and "about:blank" as Type.
type Problem struct {
	Type     string
	Title    string
	Status   int
	Detail   string
	Instance string
	// Errors names each offending path of the request, when the service
	// gave them.
	Errors []FieldError
	// RetryAfter is the answer's Retry-After header; 0 when it had none.
	RetryAfter time.Duration
	// Extensions are the members beyond RFC 9457's and Errors, by name:
	// provider and upstreamStatus of upstream problems, code of
	// /v1/messages problems, and so on.
	Extensions map[string]json.RawMessage
}

// Error returns the status, title and detail.
func (p *Problem) Error() string {
	s := fmt.Sprintf("sampled: %d %s", p.Status, p.Title)
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	return s
}

// ValidationError is the failure of SampleSchema or SampleTools after the
// service ran out of attempts without a valid answer (a 422 problem of type
// …/sample-validation-error). errors.As finds it; it unwraps to its
// Problem.
type ValidationError struct {
	// Method is "sampleSchema" or "sampleTools".
	Method string
	// Attempts is how many attempts the service made.
	Attempts int
	// LastResult is the last answer, which did not validate.
	LastResult *Result
	// Errors are the errors of the last answer, by path.
	Errors []FieldError
	// Problem is the problem document as received.
	Problem *Problem
}

// Error says which method gave up after how many attempts and why.
func (e *ValidationError) Error() string {
	s := fmt.Sprintf("sampled: %s: no valid answer after %d attempts", e.Method, e.Attempts)
	for i, fe := range e.Errors {
		if i == 3 {
			s += fmt.Sprintf(" (and %d more)", len(e.Errors)-i)
			break
		}
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		s += sep + fe.Path + ": " + fe.Message
	}
	return s
}

// Unwrap returns the problem document.
func (e *ValidationError) Unwrap() error { return e.Problem }

// maxProblemBytes bounds the bytes of an error answer that are read.
const maxProblemBytes = 4 << 20

// validationSuffix ends the type of the problem of an exhausted helper.
const validationSuffix = "/sample-validation-error"

// errorFrom reads an answer with an error status as a *Problem, or as a
// *ValidationError when the problem says a guaranteed helper ran out of
// attempts.
func errorFrom(resp *http.Response) error {
	p := &Problem{Type: "about:blank", Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode),
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if err != nil {
		p.Detail = "reading the error answer: " + err.Error()
		return p
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/problem+json" && mt != "application/json" {
		return p
	}
	return problemFrom(p, body)
}

// problemFrom reads body, a problem document, into p, and returns p, or a
// *ValidationError when the problem says a guaranteed helper ran out of
// attempts. A p without a status takes the document's.
func problemFrom(p *Problem, body []byte) error {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return p
	}
	var std struct {
		Type     string       `json:"type"`
		Title    string       `json:"title"`
		Status   int          `json:"status"`
		Detail   string       `json:"detail"`
		Instance string       `json:"instance"`
		Errors   []FieldError `json:"errors"`
	}
	if json.Unmarshal(body, &std) != nil {
		return p
	}
	if std.Type != "" {
		p.Type = std.Type
	}
	if p.Status == 0 {
		p.Status = std.Status
	}
	if std.Title != "" {
		p.Title = std.Title
	}
	p.Detail, p.Instance, p.Errors = std.Detail, std.Instance, std.Errors
	for _, k := range []string{"type", "title", "status", "detail", "instance", "errors"} {
		delete(members, k)
	}
	if len(members) > 0 {
		p.Extensions = members
	}
	if p.Status != http.StatusUnprocessableEntity || !strings.HasSuffix(p.Type, validationSuffix) {
		return p
	}
	var ext struct {
		Method     string  `json:"method"`
		Attempts   int     `json:"attempts"`
		LastResult *Result `json:"lastResult"`
	}
	if err := json.Unmarshal(body, &ext); err != nil {
		p.Detail += " (its members could not be read: " + err.Error() + ")"
		return p
	}
	return &ValidationError{Method: ext.Method, Attempts: ext.Attempts, LastResult: ext.LastResult, Errors: p.Errors, Problem: p}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date after
// now. Anything else is 0.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 32); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
