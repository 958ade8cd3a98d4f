package mcpserver_test

import (
	"net/http"
	"testing"
)

// TestOriginAndHost: a browser page on another site (DNS rebinding, or a
// plain cross-site request) is refused; loopback origins and the allowed
// ones are served.
func TestOriginAndHost(t *testing.T) {
	s := start(t, map[string]string{}, "mcpServer:\n  allowedOrigins: ['https://app.example.com']\n")
	tests := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"no origin", nil, http.StatusOK},
		{"loopback origin", map[string]string{"Origin": "http://localhost:6274"}, http.StatusOK},
		{"loopback IP origin", map[string]string{"Origin": "http://127.0.0.1:3000"}, http.StatusOK},
		{"allowed origin", map[string]string{"Origin": "https://App.example.com"}, http.StatusOK},
		{"other origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"rebound host", map[string]string{"Host": "evil.example:80"}, http.StatusForbidden},
		{"rebound host and origin", map[string]string{"Host": "evil.example", "Origin": "http://evil.example"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := post(t, s.url, tt.header); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
		})
	}
}
