package app

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/testing/redistest"
)

// keyed returns cfg with one API key of 60 requests a minute (a burst of
// 6), named afresh so that no other test run's budget is in Redis, and the
// bearer token that sends it.
func keyed(cfg *config.Config) (*config.Config, string) {
	name, secret := "k"+rand.Text(), rand.Text()
	cfg.APIKeys = []config.APIKey{{Name: name, Hash: access.HashKey(secret).String(), RequestsPerMinute: 60}}
	return cfg, secret
}

// getKeyed sends GET url with the bearer token and returns the status, the
// Retry-After header and the problem's limit, if any.
func getKeyed(t *testing.T, url, secret string) (status int, retryAfter, limit string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct{ Limit string }
	_ = json.Unmarshal(b, &p)
	return resp.StatusCode, resp.Header.Get("Retry-After"), p.Limit
}

// TestLimitsSharedOverRedis: two services on one Redis share a key's
// rate: its burst of 6 is spent across both, and the next request, on
// either, is a 429 with Retry-After.
func TestLimitsSharedOverRedis(t *testing.T) {
	cfg, secret := keyed(redisConfig(t, "unix://"+redistest.Socket(t)))
	_, urlA, regA := serve(t, cfg)
	_, urlB, regB := serve(t, cfg)
	type answer struct {
		Status     int
		RetryAfter string
		Limit      string
	}
	var got []answer
	for i := range 8 {
		url := urlA
		if i%2 == 1 {
			url = urlB
		}
		s, ra, l := getKeyed(t, url+"/v1/loops", secret)
		got = append(got, answer{s, ra, l})
	}
	ok, limited := answer{Status: http.StatusOK}, answer{http.StatusTooManyRequests, "1", "requests"}
	want := []answer{ok, ok, ok, ok, ok, ok, limited, limited}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("8 requests of a 60-a-minute key alternating over two replicas (-want +got):\n%s", diff)
	}
	if got := sum(t, regA, "sampled_rate_limited_total", "limit", "requests") +
		sum(t, regB, "sampled_rate_limited_total", "limit", "requests"); got != 2 {
		t.Errorf("requests rate limited on A and B = %v, want 2", got)
	}
	// Each check is one Redis operation, timed with the run store's.
	if got := sum(t, regA, "sampled_redis_operation_duration_seconds", "op", "limit_rate"); got != 4 {
		t.Errorf(`sampled_redis_operation_duration_seconds_count{op="limit_rate"} on A = %v, want 4`, got)
	}
}

// TestLimitsFailOpenWithoutRedis: with Redis unreachable, a key's
// requests past its rate are served (GET /v1/models needs no run store),
// each within the check's timeout, and counted as unchecked.
func TestLimitsFailOpenWithoutRedis(t *testing.T) {
	cfg, secret := keyed(redisConfig(t, "unix://"+t.TempDir()+"/none.sock"))
	_, url, reg := serve(t, cfg)
	for i := range 8 {
		start := time.Now()
		if s, _, _ := getKeyed(t, url+"/v1/models", secret); s != http.StatusOK {
			t.Fatalf("request %d with Redis down = %d, want 200 (limits fail open)", i+1, s)
		}
		if d := time.Since(start); d > access.DefaultLimitTimeout+2*time.Second {
			t.Errorf("request %d took %v with a limit timeout of %v", i+1, d, access.DefaultLimitTimeout)
		}
	}
	if got := sum(t, reg, "sampled_rate_limit_unchecked_total", "limit", "requests"); got != 8 {
		t.Errorf(`sampled_rate_limit_unchecked_total{limit="requests"} = %v, want 8`, got)
	}
}

// sum adds the series of the named metric whose label has the value: a
// counter's value, a histogram's count of observations.
func sum(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					total += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return total
}

// TestLoopCapSharedOverRedis: two services on one Redis share a key's cap
// of one loop: while a loop started on A waits for its model, B refuses
// the key's second loop with a 429; once A's loop is cancelled, B starts
// one.
func TestLoopCapSharedOverRedis(t *testing.T) {
	// The model never answers: each call holds until its request ends,
	// which the server notices once it has read the body.
	calls := make(chan struct{}, 8)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(upstream.Close)
	name, secret := "k"+rand.Text(), rand.Text()
	yaml := fmt.Sprintf(`redis: {url: "unix://%s"}
providers:
  - name: up
    type: openai
    endpoint: %s/v1
    apiKeyEnv: UP_KEY
    models: [{name: m}]
apiKeys:
  - name: %s
    hash: %s
    concurrentLoops: 1
`, redistest.Socket(t), upstream.URL, name, access.HashKey(secret))
	env := map[string]string{"SAMPLED_CONFIG": "limits.yaml", "UP_KEY": "sk-test"}
	cfg := loadConfig(t, env, yaml)
	_, urlA, _ := serve(t, cfg)
	_, urlB, _ := serve(t, cfg)
	send := func(method, url, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	const loop = `{"prompt":"hi","model":"up/m"}`

	resp, body := send(http.MethodPost, urlA+"/v1/loops", loop)
	var started struct{ ID string }
	if err := json.Unmarshal(body, &started); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/loops on A = %d %s", resp.StatusCode, body)
	}
	select {
	case <-calls: // A's loop is running: it waits for the model
	case <-time.After(30 * time.Second):
		t.Fatal("A's loop did not call the model within 30s")
	}
	resp, body = send(http.MethodPost, urlB+"/v1/loops", loop)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"limit":"loops"`) {
		t.Fatalf("second loop on B while A's runs = %d (Retry-After %q) %s; want 429, limit loops", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	if resp, body := send(http.MethodDelete, urlB+"/v1/loops/"+started.ID, ""); resp.StatusCode >= 300 {
		t.Fatalf("DELETE A's loop on B = %d %s", resp.StatusCode, body)
	}
	// The loop's end frees its slot when A has recorded it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, body = send(http.MethodPost, urlB+"/v1/loops", loop)
		if resp.StatusCode == http.StatusCreated {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("loop on B after A's was cancelled = %d %s", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond) // polling for the cancelled loop's end
	}
	if err := json.Unmarshal(body, &started); err != nil {
		t.Fatal(err)
	}
	if resp, body := send(http.MethodDelete, urlA+"/v1/loops/"+started.ID, ""); resp.StatusCode >= 300 {
		t.Fatalf("DELETE B's loop on A = %d %s", resp.StatusCode, body)
	}
}
