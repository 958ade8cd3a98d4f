package app

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// costConfig prices offline/flaky and offline/default at $2.50 in and
// $10 out per million tokens and leaves offline/broken unpriced; one API
// key, "team-a".
const costConfig = `
providers:
  - name: offline
    type: offline
    models:
      - name: default
        price: {input: 2.5, output: 10}
      - name: flaky
        price: {input: 2.5, output: 10}
      - name: broken
apiKeys:
  - name: team-a
    keyEnv: TEAM_A_KEY
`

// costServer serves costConfig; it returns the URL, the key's bearer
// token and the registry.
func costServer(t *testing.T) (string, string, *prometheus.Registry) {
	t.Helper()
	secret := "team-a-secret-" + strconv.Itoa(int(time.Now().UnixNano()%1e6))
	cfg := loadConfig(t, map[string]string{"SAMPLED_CONFIG": "sampled.yaml", "TEAM_A_KEY": secret}, costConfig)
	reg := prometheus.NewRegistry()
	a, err := New(context.Background(), Options{Config: cfg, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, secret, reg
}

// postKeyed posts body to url with the bearer token; it returns the
// status, the cost header and the answer's usage.
func postKeyed(t *testing.T, url, secret, body string) (int, string, sampler.Usage) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
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
	var res struct{ Usage sampler.Usage }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return resp.StatusCode, resp.Header.Get("Sampled-Cost-USD"), res.Usage
}

// near reports whether two dollar amounts agree to a billionth of a
// dollar (sums of float64 prices are not exact).
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestCostOfAGuaranteedHelper: a schema request on offline/flaky takes
// two attempts (the first answer is broken); its cost is every attempt's
// tokens at flaky's price, in the answer's usage and header and in the
// key's cost series, and the retry's series hold the first attempt's
// tokens and cost.
func TestCostOfAGuaranteedHelper(t *testing.T) {
	url, secret, reg := costServer(t)
	status, header, u := postKeyed(t, url+"/v1/sample/schema", secret,
		`{"prompt":"a person","model":"offline/flaky","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	// The offline provider counts words: the first attempt reads 2 and
	// writes 1, the second reads 30 (the question, the broken answer and
	// the correction) and writes 1. At $2.50 per million in and $10 out:
	// 32 × $0.0000025 + 2 × $0.00001 = $0.00008 + $0.00002 = $0.0001.
	if u.InputTokens != 32 || u.OutputTokens != 2 || !near(u.CostUSD, 0.0001) || u.Unpriced {
		t.Errorf("usage = %+v, want 32 in, 2 out, costUsd 0.0001", u)
	}
	if header != "0.0001" {
		t.Errorf("Sampled-Cost-USD = %q, want 0.0001", header)
	}
	// A call is counted after the answer is sent.
	testwait.Poll(t, time.Millisecond, testwait.Timeout, "the calls' cost counted", func() bool {
		return near(sum(t, reg, "sampled_cost_usd_total", "key", "team-a"), 0.0001)
	})
	if got := sum(t, reg, "sampled_cost_usd_total", "key", "team-a"); !near(got, 0.0001) {
		t.Errorf("sampled_cost_usd_total{key=team-a} = %v, want 0.0001", got)
	}
	// The retried first attempt: 2 × $0.0000025 + 1 × $0.00001.
	in := sum(t, reg, "sampled_retry_tokens_total", "type", "input")
	out := sum(t, reg, "sampled_retry_tokens_total", "type", "output")
	if in != 2 || out != 1 {
		t.Errorf("retry tokens %v in, %v out; want 2 and 1", in, out)
	}
	if got := sum(t, reg, "sampled_retry_cost_usd_total", "method", "sampleSchema"); !near(got, 0.000015) {
		t.Errorf("sampled_retry_cost_usd_total = %v, want 0.000015", got)
	}
	if got := sum(t, reg, "sampled_unpriced_calls_total", "provider", "offline"); got != 0 {
		t.Errorf("unpriced calls = %v, want 0", got)
	}
}

// costPrice is flaky's price in costConfig.
var costPrice = config.Price{Input: 2.5, Output: 10}

// TestCostHandComputed checks Cost against figures computed by hand.
func TestCostHandComputed(t *testing.T) {
	u := sampler.Usage{InputTokens: 1_000_000, OutputTokens: 250_000}
	// 1M × $2.50/M + 0.25M × $10/M = $2.50 + $2.50.
	if got := Cost(u, &costPrice); got != 5 {
		t.Errorf("Cost = %v, want 5", got)
	}
	u = sampler.Usage{InputTokens: 12, OutputTokens: 7}
	// 12 × 2.5e-6 + 7 × 1e-5 = 0.00003 + 0.00007.
	if got := Cost(u, &costPrice); !near(got, 0.0001) {
		t.Errorf("Cost = %v, want 0.0001", got)
	}
	// Of 1M input tokens 400k came from the cache: 0.6M × $2.50/M +
	// 0.4M × $1.25/M + 0.1M × $10/M = $1.50 + $0.50 + $1.
	cachedPrice := 1.25
	withCache := costPrice
	withCache.CachedInput = &cachedPrice
	u = sampler.Usage{InputTokens: 1_000_000, CachedInputTokens: 400_000, OutputTokens: 100_000}
	if got := Cost(u, &withCache); !near(got, 3) {
		t.Errorf("Cost with cached input = %v, want 3", got)
	}
	// Without a cachedInput price the cached tokens cost Input: $2.50 + $1.
	if got := Cost(u, &costPrice); !near(got, 3.5) {
		t.Errorf("Cost without a cachedInput price = %v, want 3.5", got)
	}
}

// TestUnpricedModel: a call of offline/broken, which has no price, costs
// 0, says so in its usage, and is counted as unpriced, under the key.
func TestUnpricedModel(t *testing.T) {
	url, secret, reg := costServer(t)
	status, header, u := postKeyed(t, url+"/v1/sample", secret, `{"prompt":"hi","model":"offline/broken"}`)
	if status != http.StatusOK || header != "0" || u.CostUSD != 0 || !u.Unpriced {
		t.Errorf("status %d, header %q, usage %+v; want 200, 0 and unpriced", status, header, u)
	}
	testwait.Poll(t, time.Millisecond, testwait.Timeout, "the unpriced call counted", func() bool {
		return sum(t, reg, "sampled_unpriced_calls_total", "model", "offline/broken") == 1
	})
	if got := sum(t, reg, "sampled_cost_usd_total", "key", "team-a"); got != 0 {
		t.Errorf("cost = %v, want 0", got)
	}
	// The series of the key and of each model exist from the start.
	if n := seriesOf(t, reg, "sampled_cost_usd_total"); n != 3 {
		t.Errorf("%d cost series, want 3 (one key × three models)", n)
	}

}

// seriesOf counts the series of the named metric.
func seriesOf(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// TestCostHeader: /v1/messages and the OpenAI facade carry the cost
// header too; a plain call of flaky is one call, priced.
func TestCostHeader(t *testing.T) {
	url, secret, _ := costServer(t)
	for path, body := range map[string]string{
		"/v1/messages": `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":20,` +
			`"modelPreferences":{"hints":[{"name":"offline/flaky"}]}}`,
		"/openai/v1/chat/completions": `{"model":"offline/flaky","messages":[{"role":"user","content":"hi"}]}`,
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		h := resp.Header.Get("Sampled-Cost-USD")
		if v, err := strconv.ParseFloat(h, 64); resp.StatusCode != http.StatusOK || err != nil || v <= 0 {
			t.Errorf("%s: %d, Sampled-Cost-USD %q; want 200 and a cost (%s)", path, resp.StatusCode, h, b)
		}
	}
}

// TestCostOfALoop: a loop's usage sums its model calls' cost, and the
// calls count under the key that started the loop.
func TestCostOfALoop(t *testing.T) {
	url, secret, reg := costServer(t)
	do := func(method, path, body string, v any) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader(body))
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
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	var started struct{ ID string }
	if status := do(http.MethodPost, "/v1/loops", `{"prompt":"Please calculate 6 * 7","model":"offline/default","allowedTools":["std__*"]}`, &started); status != http.StatusCreated {
		t.Fatalf("POST /v1/loops = %d", status)
	}
	var snap loop.Snapshot
	testwait.Poll(t, 10*time.Millisecond, testwait.Timeout, "the loop to end", func() bool {
		snap = loop.Snapshot{}
		do(http.MethodGet, "/v1/loops/"+started.ID, "", &snap)
		return snap.Status != loop.StatusRunning
	})
	u := snap.Usage
	want := float64(u.InputTokens)*2.5/1e6 + float64(u.OutputTokens)*10/1e6
	// Two model turns at least: the calculator's call, then the answer.
	if snap.Status != loop.StatusCompleted || snap.Iterations < 2 || u.InputTokens == 0 || !near(u.CostUSD, want) || u.Unpriced {
		t.Fatalf("loop %s after %d iterations, usage %+v; want completed, costUsd %v", snap.Status, snap.Iterations, u, want)
	}
	testwait.Poll(t, time.Millisecond, testwait.Timeout, "the loop's cost counted", func() bool {
		return near(sum(t, reg, "sampled_cost_usd_total", "key", "team-a"), want)
	})
}

// TestCostOfAnExhaustedHelper: a guarantee that runs out of attempts was
// paid for too; its 422 says what it cost. With no retries, flaky's broken
// first answer is the only one: 2 × $0.0000025 + 1 × $0.00001.
func TestCostOfAnExhaustedHelper(t *testing.T) {
	url, secret, _ := costServer(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/sample/schema", strings.NewReader(
		`{"prompt":"a person","model":"offline/flaky","retries":0,"schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if h := resp.Header.Get("Sampled-Cost-USD"); resp.StatusCode != http.StatusUnprocessableEntity || h != "0.000015" {
		t.Errorf("%d, Sampled-Cost-USD %q; want 422 and 0.000015", resp.StatusCode, h)
	}
}
