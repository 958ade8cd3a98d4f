package openaiapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/kaptinlin/jsonpointer"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

// ErrorResponse is the body of an error answer: OpenAI's, whose error
// object sampled extends with members of its own, which OpenAI's schema
// allows and the SDKs keep (the Go SDK's Error.JSON.ExtraFields).
type ErrorResponse struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is OpenAI's error object and sampled's members: Attempts,
// the model calls made when a guarantee ran out of them, and Errors, what
// was wrong, each at its JSON Pointer (into the request, or, when the
// attempts ran out, into the last answer's message or the JSON value of
// its content).
type ErrorObject struct {
	chat.Error
	Attempts int                  `json:"attempts,omitempty"`
	Errors   []sampler.FieldError `json:"errors,omitempty"`
}

// Error returns the OpenAI error of a sampled problem: its status, its
// problem type's slug ("invalid-request"), detail, errors by path and
// extension members (of which "attempts" is kept). The type follows the
// status as OpenAI's do; the code is the slug's, in OpenAI's words where
// it has some ("invalid_api_key", "rate_limit_exceeded",
// "model_not_found"); param names the first error's member in OpenAI's
// dotted form (messages[2].content), except for a 422, whose errors are in
// the answer, not in a request parameter.
func Error(status int, slug, detail string, errs []sampler.FieldError, ext map[string]any) ErrorResponse {
	if detail == "" {
		detail = http.StatusText(status)
	}
	obj := ErrorObject{Error: chat.Error{Message: detail, Type: errorType(status)}, Errors: errs}
	code := strings.ReplaceAll(slug, "-", "_")
	switch slug {
	case "unauthorized":
		code = "invalid_api_key"
	case "rate-limited":
		code = "rate_limit_exceeded"
	case "sample-validation-error":
		code = "validation_failed"
	case "invalid-request":
		if len(errs) > 0 && errs[0].Path == "/model" {
			code = "model_not_found"
		}
	}
	if code != "" {
		obj.Code = &code
	}
	if len(errs) > 0 && status != http.StatusUnprocessableEntity {
		obj.Param = Param(errs[0].Path)
	}
	if a, ok := ext["attempts"].(int); ok {
		obj.Attempts = a
	}
	return ErrorResponse{Error: obj}
}

// errorType is the error type OpenAI gives answers of status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusInternalServerError:
		return "server_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// Param writes a JSON Pointer in OpenAI's dotted form: /messages/2/content
// is messages[2].content; the root is nil.
func Param(path string) *string {
	if path == "" || path == "/" {
		return nil
	}
	var b strings.Builder
	for tok := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		if t, err := jsonpointer.UnescapeToken(tok); err == nil {
			tok = t
		}
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	s := b.String()
	return &s
}
