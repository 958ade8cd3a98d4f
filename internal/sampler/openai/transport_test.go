package openai

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sampled/sampled/internal/testing/testwait"
)

// TestConnectionReuse sends two waves of 64 concurrent calls, each wave
// held at the upstream until all its calls have arrived, so that the first
// opens 64 connections. The second must find them all idle in the
// provider's pool and dial none: with net/http's default of 2 idle
// connections per host it would dial 62.
func TestConnectionReuse(t *testing.T) {
	const calls = 64
	reply := readTestdata(t, "replies/text.json")
	var (
		dials   atomic.Int32
		arrived = make(chan struct{})
		mu      sync.Mutex
		release chan struct{}
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		wait := release
		mu.Unlock()
		arrived <- struct{}{}
		<-wait
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	p := New(Options{BaseURL: srv.URL, APIKey: testKey})
	for wave := range 2 {
		mu.Lock()
		release = make(chan struct{})
		mu.Unlock()
		errs := make(chan error, calls)
		for range calls {
			go func() {
				_, err := p.Sample(context.Background(), helloRequest())
				errs <- err
			}()
		}
		for range calls {
			testwait.Recv(t, arrived, "a call to reach the upstream")
		}
		mu.Lock()
		close(release)
		mu.Unlock()
		for range calls {
			if err := <-errs; err != nil {
				t.Fatalf("wave %d: Sample: %v", wave, err)
			}
		}
	}
	if got := dials.Load(); got != calls {
		t.Errorf("the upstream saw %d connections for two waves of %d calls, want %d", got, calls, calls)
	}
}
