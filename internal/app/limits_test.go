package app

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/runs/redis/redistest"
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

// sum adds the samples of the named counter whose label has the value.
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
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
