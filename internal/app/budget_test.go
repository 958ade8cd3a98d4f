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

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// budgetConfig prices offline/default at $2.50 in and $10 out per
// million tokens (an output token is $0.00001, 10,000 billionths), and
// has three keys: spender, $0.0001 a day; hasty, 50 tokens a minute;
// looper, $0.000100001 a day, which lets a loop's first iteration of
// maxTokens 10 ($0.0001) in and refuses the next, whatever the first
// cost.
const budgetConfig = `
providers:
  - name: offline
    type: offline
    models:
      - name: default
        price: {input: 2.5, output: 10}
apiKeys:
  - name: spender
    keyEnv: SPENDER_KEY
    usdPerDay: 0.0001
  - name: hasty
    keyEnv: HASTY_KEY
    tokensPerMinute: 50
  - name: looper
    keyEnv: LOOPER_KEY
    usdPerDay: 0.000100001
`

// budgetServer serves budgetConfig; it returns the URL, a bearer token by
// key name and the registry.
func budgetServer(t *testing.T) (string, map[string]string, *prometheus.Registry) {
	t.Helper()
	keys := map[string]string{}
	env := map[string]string{"SAMPLED_CONFIG": "sampled.yaml"}
	for _, name := range []string{"spender", "hasty", "looper"} {
		keys[name] = name + "-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		env[strings.ToUpper(name)+"_KEY"] = keys[name]
	}
	cfg := loadConfig(t, env, budgetConfig)
	reg := prometheus.NewRegistry()
	a, err := New(context.Background(), Options{Config: cfg, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, keys, reg
}

// keyAnswer is an answer to a keyed request.
type keyAnswer struct {
	status     int
	retryAfter string
	body       []byte
}

// limit is the problem's limit member.
func (a keyAnswer) limit() string {
	var p struct{ Limit string }
	_ = json.Unmarshal(a.body, &p)
	return p.Limit
}

// usage is the answer's usage.
func (a keyAnswer) usage(t *testing.T) sampler.Usage {
	t.Helper()
	var r struct{ Usage sampler.Usage }
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	return r.Usage
}

// callKey sends method url with the bearer token and body (none when
// empty).
func callKey(t *testing.T, method, url, secret, body string) keyAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
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
	return keyAnswer{resp.StatusCode, resp.Header.Get("Retry-After"), b}
}

// nanoCost is what u costs at $2.50 in and $10 out per million, in
// billionths of a dollar: 2,500 a token in and 10,000 out.
func nanoCost(u sampler.Usage) int64 { return int64(u.InputTokens)*2500 + int64(u.OutputTokens)*10000 }

// secondsToMidnight is the Retry-After of a day's budget at t.
func secondsToMidnight(t time.Time) int {
	t = t.UTC()
	next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
	return int(math.Ceil(next.Sub(t).Seconds()))
}

// keySelf reads GET /v1/keys/self.
type keySelf struct {
	Name  string
	Usage struct {
		TokensPerMinute *struct{ Used, Limit int }
		Day, Month      struct {
			USD      float64
			Limit    *float64
			ResetsAt time.Time
		}
	}
}

func getKeySelf(t *testing.T, url, secret string) keySelf {
	t.Helper()
	a := callKey(t, http.MethodGet, url+"/v1/keys/self", secret, "")
	var ks keySelf
	if a.status != http.StatusOK || json.Unmarshal(a.body, &ks) != nil {
		t.Fatalf("GET /v1/keys/self = %d: %s", a.status, a.body)
	}
	return ks
}

// TestBudgetOfAKey: spender's $0.0001 a day. After a first call, a call
// whose maxTokens at $10 a million would pass the rest by one token is a
// 429 budget with the seconds until the next UTC day, one that fits it
// exactly is served; GET /v1/keys/self shows the spend as computed by
// hand from the answers' usage, and sampled_rate_limited_total counts the
// refusal.
func TestBudgetOfAKey(t *testing.T) {
	url, keys, reg := budgetServer(t)
	sample := func(maxTokens int) keyAnswer {
		return callKey(t, http.MethodPost, url+"/v1/sample", keys["spender"],
			`{"prompt":"Name three primary colours, please.","maxTokens":`+strconv.Itoa(maxTokens)+`}`)
	}
	first := sample(2)
	if first.status != http.StatusOK {
		t.Fatalf("first call: %d %s", first.status, first.body)
	}
	spent := nanoCost(first.usage(t))
	// The output tokens the rest pays for: one more is over.
	fits := int((100_000 - spent) / 10_000)
	if fits < 1 {
		t.Fatalf("the first call cost %d billionths: no room left to test the edge", spent)
	}
	before := time.Now()
	over := sample(fits + 1)
	after := time.Now()
	ra, _ := strconv.Atoi(over.retryAfter)
	if over.status != http.StatusTooManyRequests || over.limit() != "budget" || ra > secondsToMidnight(before) || ra < secondsToMidnight(after) {
		t.Errorf("maxTokens %d with %d of 100,000 billionths spent: %d, Retry-After %q, %s; want 429 budget, the seconds to midnight UTC (%d)",
			fits+1, spent, over.status, over.retryAfter, over.body, secondsToMidnight(after))
	}
	if !strings.Contains(string(over.body), "$0.0001 a day") {
		t.Errorf("the refusal does not name the budget: %s", over.body)
	}
	exact := sample(fits)
	if exact.status != http.StatusOK {
		t.Fatalf("maxTokens %d, exactly the rest: %d %s", fits, exact.status, exact.body)
	}
	spent += nanoCost(exact.usage(t))

	ks := getKeySelf(t, url, keys["spender"])
	if want := float64(spent) / 1e9; ks.Name != "spender" || math.Abs(ks.Usage.Day.USD-want) > 1e-12 || math.Abs(ks.Usage.Month.USD-want) > 1e-12 ||
		ks.Usage.Day.Limit == nil || *ks.Usage.Day.Limit != 0.0001 || ks.Usage.TokensPerMinute != nil {
		t.Errorf("keys/self = %+v, want $%v spent today and this month of $0.0001 a day, no token rate", ks, want)
	}
	if got := sum(t, reg, "sampled_rate_limited_total", "limit", "budget"); got != 1 {
		t.Errorf(`sampled_rate_limited_total{limit="budget"} = %v, want 1`, got)
	}
	// A sample is counted after its answer is sent.
	testwait.Poll(t, time.Millisecond, testwait.Timeout, "the limited sample counted", func() bool {
		return sum(t, reg, "sampled_samples_total", "outcome", sampler.OutcomeLimited) >= 1
	})
	if got := sum(t, reg, "sampled_samples_total", "outcome", sampler.OutcomeLimited); got != 1 {
		t.Errorf(`sampled_samples_total{outcome="limited"} = %v, want 1`, got)
	}
}

// TestTokensOfAKey: hasty's 50 tokens a minute. After a call that used N
// tokens (input and output), a request of maxTokens 50 − N + 1 is a 429
// tokens, to wait about one token's time (1.2 s), and 50 − N is served;
// GET /v1/keys/self counts the tokens in use.
func TestTokensOfAKey(t *testing.T) {
	url, keys, reg := budgetServer(t)
	sample := func(maxTokens int) keyAnswer {
		return callKey(t, http.MethodPost, url+"/v1/sample", keys["hasty"], `{"prompt":"hi there","maxTokens":`+strconv.Itoa(maxTokens)+`}`)
	}
	first := sample(3)
	if first.status != http.StatusOK {
		t.Fatalf("first call: %d %s", first.status, first.body)
	}
	u := first.usage(t)
	used := u.InputTokens + u.OutputTokens
	over := sample(50 - used + 1)
	if over.status != http.StatusTooManyRequests || over.limit() != "tokens" || (over.retryAfter != "1" && over.retryAfter != "2") {
		t.Errorf("maxTokens %d with %d of 50 tokens in use: %d, Retry-After %q, %s; want 429 tokens, 1 or 2 s",
			50-used+1, used, over.status, over.retryAfter, over.body)
	}
	if ks := getKeySelf(t, url, keys["hasty"]); ks.Usage.TokensPerMinute == nil || ks.Usage.TokensPerMinute.Limit != 50 ||
		ks.Usage.TokensPerMinute.Used < used-1 || ks.Usage.TokensPerMinute.Used > used {
		t.Errorf("keys/self tokens = %+v, want %d (or one less, drained) in use of 50", ks.Usage.TokensPerMinute, used)
	}
	if exact := sample(50 - used); exact.status != http.StatusOK {
		t.Errorf("maxTokens %d with %d of 50 in use (exactly the rest): %d %s", 50-used, used, exact.status, exact.body)
	}
	if got := sum(t, reg, "sampled_rate_limited_total", "limit", "tokens"); got != 1 {
		t.Errorf(`sampled_rate_limited_total{limit="tokens"} = %v, want 1`, got)
	}
}

// TestLoopOutOfBudget: looper's budget lets a loop's first iteration in
// and refuses the second: the loop ends failed with the budget's reason,
// its usage is the first iteration's, and keys/self says so.
func TestLoopOutOfBudget(t *testing.T) {
	url, keys, reg := budgetServer(t)
	start := callKey(t, http.MethodPost, url+"/v1/loops", keys["looper"],
		`{"prompt":"Please calculate 6 * 7","allowedTools":["std__*"],"maxTokens":10}`)
	var started struct{ ID string }
	if start.status != http.StatusCreated || json.Unmarshal(start.body, &started) != nil {
		t.Fatalf("POST /v1/loops = %d %s", start.status, start.body)
	}
	var snap loop.Snapshot
	testwait.Poll(t, 10*time.Millisecond, testwait.Timeout, "the loop to end", func() bool {
		snap = loop.Snapshot{}
		a := callKey(t, http.MethodGet, url+"/v1/loops/"+started.ID, keys["looper"], "")
		_ = json.Unmarshal(a.body, &snap)
		return snap.Status != "" && snap.Status != loop.StatusRunning
	})
	if snap.Status != loop.StatusFailed || snap.Iterations != 1 || !strings.Contains(snap.Error, "budget of $0.000100001 a day") ||
		!strings.Contains(snap.Error, "retry after") {
		t.Errorf("loop %s after %d iterations, error %q; want failed after 1, naming the day's budget", snap.Status, snap.Iterations, snap.Error)
	}
	want := float64(nanoCost(snap.Usage)) / 1e9
	if want == 0 || math.Abs(snap.Usage.CostUSD-want) > 1e-12 {
		t.Errorf("loop usage %+v, want a cost of $%v", snap.Usage, want)
	}
	if ks := getKeySelf(t, url, keys["looper"]); math.Abs(ks.Usage.Day.USD-want) > 1e-12 {
		t.Errorf("keys/self day = $%v, want the loop's $%v", ks.Usage.Day.USD, want)
	}
	if got := sum(t, reg, "sampled_rate_limited_total", "key", "looper"); got != 1 {
		t.Errorf(`sampled_rate_limited_total{key="looper"} = %v, want 1`, got)
	}
}

// TestBudgetWithoutRedis: with Redis unreachable, a key's budget lets its
// calls in, each counted as unchecked (limits fail open), and
// GET /v1/keys/self, which cannot say what was spent, answers 503 with
// Retry-After.
func TestBudgetWithoutRedis(t *testing.T) {
	cfg, secret := keyed(redisConfig(t, "unix://"+t.TempDir()+"/none.sock"))
	cfg.APIKeys[0].USDPerDay = 0.000001
	_, url, reg := serve(t, cfg)
	for i := range 2 {
		if a := callKey(t, http.MethodPost, url+"/v1/sample", secret, `{"prompt":"hi","maxTokens":1000}`); a.status != http.StatusOK {
			t.Fatalf("call %d with Redis down: %d %s, want 200 (limits fail open)", i+1, a.status, a.body)
		}
	}
	if got := sum(t, reg, "sampled_rate_limit_unchecked_total", "limit", "budget"); got != 2 {
		t.Errorf(`sampled_rate_limit_unchecked_total{limit="budget"} = %v, want 2`, got)
	}
	a := callKey(t, http.MethodGet, url+"/v1/keys/self", secret, "")
	if a.status != http.StatusServiceUnavailable || a.retryAfter != "1" || !strings.Contains(string(a.body), "limits-unavailable") {
		t.Errorf("GET /v1/keys/self with Redis down: %d, Retry-After %q, %s; want 503 limits-unavailable, 1", a.status, a.retryAfter, a.body)
	}
}
