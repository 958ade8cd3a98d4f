package sampler

import (
	"fmt"
	"net/http"
	"testing"
)

// TestUpstreamErrorRetryable: timeouts, failed connections, 408, 429 and
// 5xx are worth another try; no other status is, in particular no other 4xx.
func TestUpstreamErrorRetryable(t *testing.T) {
	tests := []struct {
		err  UpstreamError
		want bool
	}{
		{UpstreamError{Timeout: true}, true},
		{UpstreamError{}, true}, // no response: the connection failed
		{UpstreamError{Status: 400}, false},
		{UpstreamError{Status: 401}, false},
		{UpstreamError{Status: 403}, false},
		{UpstreamError{Status: 404}, false},
		{UpstreamError{Status: 408}, true},
		{UpstreamError{Status: 409}, false},
		{UpstreamError{Status: 422}, false},
		{UpstreamError{Status: 429}, true},
		{UpstreamError{Status: 499}, false},
		{UpstreamError{Status: 500}, true},
		{UpstreamError{Status: 501}, true},
		{UpstreamError{Status: 502}, true},
		{UpstreamError{Status: 503}, true},
		{UpstreamError{Status: 504}, true},
		{UpstreamError{Status: 599}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s timeout=%v", tt.err.Status, http.StatusText(tt.err.Status), tt.err.Timeout), func(t *testing.T) {
			if got := tt.err.Retryable(); got != tt.want {
				t.Errorf("Retryable() = %v, want %v", got, tt.want)
			}
		})
	}
}
