package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sampled/sampled/client"
	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
)

// service is sampled as it runs, with its offline provider, served on a
// loopback port; wrap, when set, sees every request first.
func service(t testing.TB, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	srv, _ := serviceApp(t, wrap)
	return srv
}

// serviceApp is service, with its run store.
func serviceApp(t testing.TB, wrap func(http.Handler) http.Handler) (*httptest.Server, runs.Store) {
	t.Helper()
	store := memory.New(memory.Options{})
	a, err := app.New(context.Background(), app.Options{Runs: store})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = a.Handler
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	return srv, store
}

// newClient returns a client of a new service.
func newClient(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	srv := service(t, nil)
	return mustClient(t, srv.URL, append([]client.Option{client.WithHTTPClient(srv.Client())}, opts...)...)
}

func mustClient(t testing.TB, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorded is a request as a recorder saw it.
type recorded struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// recorder keeps the requests passing through it.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

func (rec *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			body, _ = readAll(r)
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body)})
		rec.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (rec *recorder) all() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.reqs...)
}

// readAll reads r's body and puts it back for the handler.
func readAll(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, err
}
