package handlers

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/testing/testwait"
)

// TestRouting checks what the router answers for each kind of request: a
// route's own method, another method on a known path (405 with the path's
// methods in Allow, HEAD included), an unknown path, an unclean one and "*"
// (404). Each is counted under the route pattern that served it, or
// "unmatched".
func TestRouting(t *testing.T) {
	s := startStack(t, 0)
	tests := []struct {
		method, path string
		status       int
		allow        string
		route        string
	}{
		{"GET", "/healthz", 200, "", "/healthz"},
		{"HEAD", "/healthz", 405, "GET", "unmatched"},
		{"GET", "/v1/sample", 405, "POST", "unmatched"},
		{"PUT", "/v1/loops", 405, "GET, POST", "unmatched"},
		{"GET", "/v1/loops/0123abcd", 404, "", "/v1/loops/{id}"},
		{"PUT", "/v1/loops/0123abcd", 405, "GET, DELETE", "unmatched"},
		{"POST", "/v1/loops/0123abcd/events", 405, "GET", "unmatched"},
		{"PATCH", "/mcp", 405, "GET, POST, DELETE", "unmatched"},
		{"GET", "/v1/loops/", 404, "", "unmatched"},
		{"GET", "/v1/nothing", 404, "", "unmatched"},
		{"POST", "/v1//sample", 404, "", "unmatched"},
		{"GET", "/v1/loops/../models", 404, "", "unmatched"},
		{"GET", "/healthz/.", 404, "", "unmatched"},
		{"BREW", "/", 404, "", "unmatched"},
		{"GET", "*", 404, "", "unmatched"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			target := s.url + tt.path
			if tt.path == "*" {
				target = s.url // and the request line "GET * HTTP/1.1", below
			}
			req, err := http.NewRequestWithContext(t.Context(), tt.method, target, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.path == "*" {
				req.URL.Opaque = "*"
			}
			before := testutil.ToFloat64(s.metrics.HTTPRequests.WithLabelValues(tt.route, methodLabel(tt.method), strconv.Itoa(tt.status)))
			resp, err := s.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow {
				t.Errorf("status %d, Allow %q; want %d, %q", resp.StatusCode, resp.Header.Get("Allow"), tt.status, tt.allow)
			}
			if tt.status >= 400 && tt.method != "HEAD" {
				if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" || !strings.Contains(string(body), `"status":`) {
					t.Errorf("content type %q, body %s; want a problem", ct, body)
				}
			}
			// The count is made after the answer is sent.
			got := func() float64 {
				return testutil.ToFloat64(s.metrics.HTTPRequests.WithLabelValues(tt.route, methodLabel(tt.method), strconv.Itoa(tt.status)))
			}
			testwait.Poll(t, time.Millisecond, 10*time.Second, "the request counted under its route", func() bool { return got() == before+1 })
		})
	}
}

func methodLabel(m string) string {
	if m == "BREW" {
		return "other"
	}
	return m
}
