package handlers

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// failing is a provider that always fails with err.
type failing struct{ err error }

func (f *failing) Name() string { return "failing" }

func (f *failing) Sample(context.Context, *sampler.Request) (*sampler.Response, error) {
	return nil, f.err
}

func TestUpstreamFailures(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantRetry  string
		wantType   string
	}{
		{"rate limited", &sampler.UpstreamError{Provider: "failing", Status: 429, RetryAfter: 7 * time.Second}, 503, "7", "upstream-unavailable"},
		{"unavailable", &sampler.UpstreamError{Provider: "failing", Status: 503}, 503, "", "upstream-unavailable"},
		{"server error", &sampler.UpstreamError{Provider: "failing", Status: 500}, 502, "", "upstream-error"},
		{"rejected", &sampler.UpstreamError{Provider: "failing", Status: 400, Message: "bad model"}, 502, "", "upstream-error"},
		{"timeout", &sampler.UpstreamError{Provider: "failing", Timeout: true}, 504, "", "upstream-timeout"},
		{"connection", &sampler.UpstreamError{Provider: "failing"}, 502, "", "upstream-error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startStackWith(t, stackOptions{extra: []sampler.Provider{&failing{err: tt.err}}, upstream: retry.Upstream{MaxAttempts: 1}})
			status, h, out := s.post(t, "/v1/sample", `{"prompt":"hi","model":"failing/m"}`)
			if status != tt.wantStatus || h.Get("Retry-After") != tt.wantRetry {
				t.Fatalf("status %d Retry-After %q, want %d %q: %v", status, h.Get("Retry-After"), tt.wantStatus, tt.wantRetry, out)
			}
			if !strings.HasSuffix(out["type"].(string), tt.wantType) || out["provider"] != "failing" {
				t.Errorf("problem %v", out)
			}
		})
	}
}

// TestUpstreamRetriedBeforeFailing shows retries happen inside one attempt:
// the problem comes after MaxAttempts calls.
func TestUpstreamRetriedBeforeFailing(t *testing.T) {
	f := &counting{err: &sampler.UpstreamError{Provider: "failing", Status: 502}}
	s := startStackWith(t, stackOptions{extra: []sampler.Provider{f}, upstream: retry.Upstream{MaxAttempts: 3, Rand: func() float64 { return 0 }}})
	status, _, _ := s.post(t, "/v1/sample", `{"prompt":"hi","model":"failing/m"}`)
	if status != http.StatusBadGateway || f.calls.Load() != 3 {
		t.Errorf("status %d after %d calls, want 502 after 3", status, f.calls.Load())
	}
}

type counting struct {
	err   error
	calls atomic.Int32
}

func (c *counting) Name() string { return "failing" }

func (c *counting) Sample(context.Context, *sampler.Request) (*sampler.Response, error) {
	c.calls.Add(1)
	return nil, c.err
}
