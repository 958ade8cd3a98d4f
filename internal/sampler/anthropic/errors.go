package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// apiError is what remains of an API error response once secrets are out
// of it: the SDK's error keeps the request, and with it the x-api-key
// header, so it is not passed on.
type apiError struct {
	Status  int
	Type    string
	Message string
}

func (e *apiError) Error() string {
	s := "anthropic: " + http.StatusText(e.Status)
	if e.Type != "" {
		s += ": " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// upstreamError turns any failure of a call into a *sampler.UpstreamError.
// A cancelled call keeps context.Canceled in its chain. reply is the
// response the call got, nil when none: an answer that came but could not
// be decoded, or was too large, carries its status (and is not retried as
// a connection failure would be).
func (p *Provider) upstreamError(err error, reply *http.Response) error {
	ue := &sampler.UpstreamError{Provider: p.name}
	var ae *sdk.Error
	var ne net.Error
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ae):
		body := apiErrorBody(ae.RawJSON())
		ue.Status = ae.StatusCode
		ue.Message = p.redact.String(body.Error.Message)
		if ue.Message == "" {
			ue.Message = http.StatusText(ae.StatusCode)
		}
		ue.Err = &apiError{Status: ae.StatusCode, Type: p.redact.String(body.Error.Type), Message: ue.Message}
		if ae.Response != nil {
			if d, ok := retry.ParseRetryAfter(ae.Response.Header.Get("Retry-After"), time.Now()); ok {
				ue.RetryAfter = d
			}
		}
		return ue
	case errors.Is(err, context.Canceled):
		ue.Message = "call cancelled"
	case errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout(),
		strings.Contains(err.Error(), "timeout awaiting response headers"):
		ue.Timeout = true
		ue.Message = "no answer in time"
	case errors.Is(err, sampler.ErrReplyTooLarge):
		ue.Message = sampler.ErrReplyTooLarge.Error()
		ue.Status = statusOf(reply)
	case errors.As(err, &syn), errors.As(err, &typ),
		// The SDK's wordings for a body it read but could not decode.
		strings.HasPrefix(err.Error(), "error parsing response json"),
		strings.HasPrefix(err.Error(), "expected destination type"):
		ue.Message = "malformed response"
		ue.Status = statusOf(reply)
	default:
		ue.Message = "connection failed"
	}
	ue.Err = p.redact.Error(err)
	return ue
}

// apiErrorBody decodes the documented error body
// {"type":"error","error":{"type":…,"message":…}}; anything else decodes
// to empty strings.
func apiErrorBody(raw string) (body struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}) {
	_ = json.Unmarshal([]byte(raw), &body)
	return body
}

// statusOf returns the status of reply, 0 without one.
func statusOf(reply *http.Response) int {
	if reply == nil {
		return 0
	}
	return reply.StatusCode
}

// errorObject is the *sampler.UpstreamError of an answer with a success
// status whose body is the API's error object.
func (p *Provider) errorObject(raw string, reply *http.Response) error {
	body := apiErrorBody(raw)
	ue := &sampler.UpstreamError{Provider: p.name, Status: statusOf(reply), Message: p.redact.String(body.Error.Message)}
	if ue.Message == "" {
		ue.Message = "the answer is an error object"
	}
	ue.Err = &apiError{Status: ue.Status, Type: p.redact.String(body.Error.Type), Message: ue.Message}
	return ue
}
