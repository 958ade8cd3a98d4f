package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestInterleave checks the order the interleaved client sends in: one
// request to each target in turn, the first of a turn moving by one, and
// each target's body to it; and that a failed request ends it with the
// target's URL.
func TestInterleave(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	var targets []target
	for _, name := range []string{"a", "b", "c"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, name+":"+string(body))
			mu.Unlock()
		}))
		defer srv.Close()
		targets = append(targets, target{URL: srv.URL, Body: []byte(strings.ToUpper(name))})
	}
	res, err := interleave(t.Context(), targets, 4, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields("a:A b:B c:C  b:B c:C a:A  c:C a:A b:B  a:A b:B c:C")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests in the order served (-want +got):\n%s", diff)
	}
	for i, r := range res {
		if r.OK != 4 || r.P50Ns <= 0 || r.P99Ns < r.P50Ns {
			t.Errorf("target %d: %+v; want 4 requests, a p50 and a p99 no smaller", i, r)
		}
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	_, err = interleave(t.Context(), []target{targets[0], {URL: failing.URL}}, 2, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), failing.URL) || !strings.Contains(err.Error(), "503") {
		t.Errorf("with a failing target: %v; want its URL and status", err)
	}
}
