package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventsGiveUpAfterRepeatedFailures(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"type":"https://sampled.dev/problems/not-ready","title":"Not ready","status":503}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.firstBackoff = time.Millisecond
	var errs []error
	for _, err := range c.Events(context.Background(), "loop_1") {
		errs = append(errs, err)
	}
	var p *Problem
	if len(errs) != 1 || !errors.As(errs[0], &p) || p.Status != http.StatusServiceUnavailable || !strings.Contains(errs[0].Error(), "gave up") {
		t.Fatalf("errors %v", errs)
	}
	if got := n.Load(); got != maxFailures {
		t.Errorf("%d attempts, want %d", got, maxFailures)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"7", 7 * time.Second},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
