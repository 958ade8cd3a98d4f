package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testwait"
)

func helloRequest() *sampler.Request {
	return &sampler.Request{Model: "gpt-4o", Messages: []sampler.Message{userText("Hello!")}, MaxTokens: 64}
}

// asUpstream returns err's *sampler.UpstreamError, failing the test if it
// has none.
func asUpstream(t *testing.T, err error) *sampler.UpstreamError {
	t.Helper()
	var ue *sampler.UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("error %v (%T) is not a *sampler.UpstreamError", err, err)
	}
	return ue
}

// ignoreErr leaves the wrapped cause out of comparisons.
func ignoreErr() cmp.Option { return cmpopts.IgnoreFields(sampler.UpstreamError{}, "Err") }

func TestSampleErrors(t *testing.T) {
	tests := []struct {
		name          string
		reply         reply
		want          *sampler.UpstreamError
		wantRetryable bool
	}{
		{
			name:  "rate limited with Retry-After",
			reply: reply{status: http.StatusTooManyRequests, file: "errors/rate_limit.json", header: map[string]string{"Retry-After": "7"}},
			want: &sampler.UpstreamError{Provider: "openai", Status: 429, RetryAfter: 7 * time.Second,
				Message: "Rate limit reached for gpt-4o in organization org-abc123 on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 7s."},
			wantRetryable: true,
		},
		{
			name:          "server error",
			reply:         reply{status: http.StatusInternalServerError, file: "errors/server_error.json"},
			want:          &sampler.UpstreamError{Provider: "openai", Status: 500, Message: "The server had an error while processing your request. Sorry about that!"},
			wantRetryable: true,
		},
		{
			name:  "bad request",
			reply: reply{status: http.StatusBadRequest, file: "errors/bad_request.json"},
			want: &sampler.UpstreamError{Provider: "openai", Status: 400,
				Message: "Invalid schema for response_format 'response': In context=(), 'additionalProperties' is required to be supplied and to be false."},
		},
		{
			name: "HTML from a proxy",
			reply: reply{status: http.StatusBadGateway, body: "<html>\n<body><h1>502 Bad Gateway</h1></body>\n</html>\n",
				header: map[string]string{"Content-Type": "text/html", "Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"}},
			// A date in the past is no hint.
			want:          &sampler.UpstreamError{Provider: "openai", Status: 502, Message: "Bad Gateway: <html> <body><h1>502 Bad Gateway</h1></body> </html>"},
			wantRetryable: true,
		},
		{
			name:  "unreadable reply",
			reply: reply{body: `{"id":"chatcmpl-1","object":"chat.completion",`, compat: true},
			want:  &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "unreadable reply: unexpected end of JSON input"},
		},
		{
			name:  "no choices",
			reply: reply{body: `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4o","choices":[]}`},
			want:  &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "the reply has no choices"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			p := New(Options{BaseURL: f.srv.URL, APIKey: testKey})
			resp, err := p.Sample(context.Background(), helloRequest())
			if err == nil {
				t.Fatalf("Sample = %+v, want an error", resp)
			}
			got := asUpstream(t, err)
			if diff := cmp.Diff(tt.want, got, ignoreErr()); diff != "" {
				t.Errorf("UpstreamError (-want +got):\n%s", diff)
			}
			if r := retry.Retryable(err); r != tt.wantRetryable {
				t.Errorf("retry.Retryable = %v, want %v", r, tt.wantRetryable)
			}
		})
	}
}

func TestSampleConnectionRefused(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	p := New(Options{BaseURL: url})
	_, err := p.Sample(context.Background(), helloRequest())
	got := asUpstream(t, err)
	if got.Status != 0 || got.Timeout || got.Provider != "openai" {
		t.Errorf("UpstreamError = %+v, want Status 0, no timeout, provider openai", got)
	}
	if !got.Retryable() || got.Reason() != "connection" {
		t.Errorf("Retryable() = %v, Reason() = %q; want true, connection", got.Retryable(), got.Reason())
	}
}

// TestSilentUpstream checks ResponseHeaderTimeout: an upstream that never
// answers becomes a retryable timeout, and the fake sees the client leave.
func TestSilentUpstream(t *testing.T) {
	f := newFake(t, reply{hang: true})
	p := New(Options{BaseURL: f.srv.URL, ResponseHeaderTimeout: 100 * time.Millisecond})
	_, err := p.Sample(context.Background(), helloRequest())
	got := asUpstream(t, err)
	want := &sampler.UpstreamError{Provider: "openai", Timeout: true, Message: "no answer in time"}
	if diff := cmp.Diff(want, got, ignoreErr()); diff != "" {
		t.Errorf("UpstreamError (-want +got):\n%s", diff)
	}
	if !strings.Contains(got.Err.Error(), "timeout awaiting response headers") {
		t.Errorf("Err = %v, want the transport's header timeout", got.Err)
	}
	if !retry.Retryable(err) {
		t.Error("a timeout must be retryable")
	}
	testwait.Recv(t, f.gone, "the fake to see the client leave")
}

// TestCancel cancels the caller's context while the upstream is working.
func TestCancel(t *testing.T) {
	f := newFake(t, reply{hang: true})
	p := New(Options{BaseURL: f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := p.Sample(ctx, helloRequest())
		errc <- err
	}()
	testwait.Recv(t, f.arrived, "the request to reach the fake")
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Sample error = %v, want one matching context.Canceled", err)
	}
	if ue := asUpstream(t, err); ue.Timeout || ue.Status != 0 {
		t.Errorf("UpstreamError = %+v, want no status and no timeout", ue)
	}
	if retry.Retryable(err) {
		t.Error("a cancellation must not be retried")
	}
	testwait.Recv(t, f.gone, "the fake to see the request end")
}

// TestDeadline lets the caller's deadline pass while the upstream works.
func TestDeadline(t *testing.T) {
	f := newFake(t, reply{hang: true})
	p := New(Options{BaseURL: f.srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Sample(ctx, helloRequest())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sample error = %v, want one matching context.DeadlineExceeded", err)
	}
	if ue := asUpstream(t, err); !ue.Timeout {
		t.Errorf("UpstreamError = %+v, want Timeout", ue)
	}
	testwait.Recv(t, f.gone, "the fake to see the request end")
}

// TestErrorObject checks how error bodies become the Message and the
// *APIError of the UpstreamError: OpenAI's documented error object, the
// variants compatible servers send, and bodies that are not one.
func TestErrorObject(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		wantMessage string
		// wantAPI nil means the chain holds no *APIError.
		wantAPI *APIError
	}{
		{
			name:        "documented shape",
			status:      http.StatusTooManyRequests,
			body:        `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			wantMessage: "You exceeded your current quota.",
			wantAPI:     &APIError{Message: "You exceeded your current quota.", Type: "insufficient_quota", Code: "insufficient_quota"},
		},
		{
			name:        "param and numeric code",
			status:      http.StatusBadRequest,
			body:        `{"error":{"message":"Unsupported value: 'temperature'.","type":"invalid_request_error","param":"temperature","code":400}}`,
			wantMessage: "Unsupported value: 'temperature'.",
			wantAPI:     &APIError{Message: "Unsupported value: 'temperature'.", Type: "invalid_request_error", Param: "temperature", Code: "400"},
		},
		{
			name:        "message as a list",
			status:      http.StatusBadRequest,
			body:        `{"error":{"message":["'a' is a required property","'b' is not of type 'string'"],"type":"invalid_request_error"}}`,
			wantMessage: "'a' is a required property, 'b' is not of type 'string'",
			wantAPI:     &APIError{Message: "'a' is a required property, 'b' is not of type 'string'", Type: "invalid_request_error"},
		},
		{
			name:        "empty error object",
			status:      http.StatusServiceUnavailable,
			body:        `{"error":{}}`,
			wantMessage: "Service Unavailable",
			wantAPI:     &APIError{},
		},
		{
			name:        "top-level message of a compatible server",
			status:      http.StatusBadRequest,
			body:        `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}`,
			wantMessage: `Bad Request: {"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}`,
		},
		{
			name:        "empty body with an unknown status",
			status:      599,
			wantMessage: "status 599",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{status: tt.status, body: tt.body})
			p := New(Options{BaseURL: f.srv.URL, APIKey: testKey})
			_, err := p.Sample(context.Background(), helloRequest())
			ue := asUpstream(t, err)
			if ue.Status != tt.status || ue.Message != tt.wantMessage {
				t.Errorf("UpstreamError = {Status: %d, Message: %q}, want {%d, %q}", ue.Status, ue.Message, tt.status, tt.wantMessage)
			}
			var got *APIError
			errors.As(err, &got)
			if diff := cmp.Diff(tt.wantAPI, got); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOversizeReply checks that a reply longer than sampler.MaxReplyBytes is an
// upstream error, whether its length is declared up front or only found
// while reading.
func TestOversizeReply(t *testing.T) {
	// A well-formed reply, padded past the limit.
	pad := strings.Repeat("a", sampler.MaxReplyBytes)
	big := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o","choices":[],"pad":"` + pad + `"}`
	tests := []struct {
		name   string
		header map[string]string
	}{
		{name: "declared length", header: map[string]string{"Content-Length": strconv.Itoa(len(big))}},
		{name: "chunked", header: map[string]string{"Transfer-Encoding": "chunked"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{body: big, header: tt.header, compat: true})
			p := New(Options{BaseURL: f.srv.URL})
			_, err := p.Sample(context.Background(), helloRequest())
			want := &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "the reply exceeds 16 MiB"}
			if diff := cmp.Diff(want, asUpstream(t, err), ignoreErr()); diff != "" {
				t.Errorf("UpstreamError (-want +got):\n%s", diff)
			}
		})
	}
}
