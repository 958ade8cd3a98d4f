package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/testing/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	redistest.Stop()
	os.Exit(code)
}

// serve builds an App from cfg and serves it, both closed with the test.
func serve(t *testing.T, cfg *config.Config) (*App, string, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a, err := New(t.Context(), Options{Config: cfg, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	return a, srv.URL, reg
}

func redisConfig(t *testing.T, url string) *config.Config {
	t.Helper()
	return loadConfig(t, map[string]string{"SAMPLED_REDIS_URL": url}, "")
}

// loadConfig loads the configuration env makes, with yaml as the content
// of the file SAMPLED_CONFIG names, whatever its name.
func loadConfig(t testing.TB, env map[string]string, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Load(func(k string) string { return env[k] }, func(string) ([]byte, error) { return []byte(yaml), nil })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRedisUnreachableAtStart: the service starts, /readyz says Redis does
// not answer, and sampling without loops works.
func TestRedisUnreachableAtStart(t *testing.T) {
	sock := t.TempDir() + "/none.sock"
	_, url, _ := serve(t, redisConfig(t, "unix://:secretpw@"+sock))
	code, body := get(t, url+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "Redis") || strings.Contains(body, "secretpw") {
		t.Errorf("/readyz = %d %s; want 503 naming Redis, without the password", code, body)
	}
	resp, err := http.Post(url+"/v1/sample", "application/json", strings.NewReader(`{"prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/sample = %d, want 200", resp.StatusCode)
	}
}

// TestRunsSharedOverRedis: two services on one Redis; a loop started on
// one is read, with its events, on the other.
func TestRunsSharedOverRedis(t *testing.T) {
	cfg := redisConfig(t, "unix://"+redistest.Socket(t))
	_, urlA, regA := serve(t, cfg)
	_, urlB, _ := serve(t, cfg)
	if code, body := get(t, urlB+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	resp, err := http.Post(urlA+"/v1/loops", "application/json", strings.NewReader(`{"prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	var started struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&started)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || started.ID == "" {
		t.Fatalf("POST /v1/loops on A: %d, %+v, %v", resp.StatusCode, started, err)
	}
	// B streams the run's events to their end: it follows A's run.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urlB+"/v1/loops/"+started.ID+"/events", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events on B: %d, %v", resp.StatusCode, err)
	}
	if !strings.Contains(string(stream), "event: loop.started") || !strings.Contains(string(stream), "event: loop.completed") {
		t.Errorf("events on B lack the start or the end:\n%s", stream)
	}
	code, body := get(t, urlB+"/v1/loops/"+started.ID)
	if code != http.StatusOK || !strings.Contains(body, `"completed"`) {
		t.Errorf("GET on B = %d %s; want the completed run", code, body)
	}
	mfs, err := regA.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "sampled_redis_operation_duration_seconds"
	}
	if !found {
		t.Error("A exports no sampled_redis_operation_duration_seconds")
	}
}
