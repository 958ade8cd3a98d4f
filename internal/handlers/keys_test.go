package handlers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testlog"
)

// refusing is a provider, "budget/m", whose every call is refused by the
// caller's budget, as the app's metered providers refuse them.
type refusing struct{}

func (refusing) Name() string { return "budget" }

func (refusing) Sample(context.Context, *sampler.Request) (*sampler.Response, error) {
	return nil, &access.LimitError{Limit: access.LimitBudget, RetryAfter: 90*time.Minute + time.Millisecond,
		Detail: "this API key's budget of $1 a day is spent ($1 this day)"}
}

// keysStack is the service with the access options o and the refusing
// provider.
func keysStack(t *testing.T, o access.Options) *accessStack {
	t.Helper()
	g, err := access.New(o)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	st := startStackWith(t, stackOptions{extra: []sampler.Provider{refusing{}}, loop: loop.Options{Access: g}, cfg: func(c *Config) {
		c.Access = g
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}})
	return &accessStack{stack: st, log: logs, guard: g}
}

// TestKeySelf: GET /v1/keys/self answers the caller's name and limits
// (null where unset) and what it used, as the guard counted it, in the
// document's shape; another key sees its own; without keys the caller is
// anonymous, without limits.
func TestKeySelf(t *testing.T) {
	a := keysStack(t, access.Options{RequestsPerMinute: 600, USDPerDay: 2, Keys: []access.Key{
		{Name: "alice", Digest: access.HashKey(keyAlice), TokensPerMinute: 1000, USDPerMonth: 30},
		{Name: "bob", Digest: access.HashKey(keyBob)},
	}})
	alice, _ := a.guard.Authenticate("Bearer " + keyAlice)
	a.guard.Charge(t.Context(), alice, 250, 0.125)
	a.guard.Charge(t.Context(), alice, 50, 0.000001)

	type window struct {
		USD   float64
		Limit *float64
	}
	type tokens struct{ Used, Limit int }
	type answer struct {
		Name   string
		Limits map[string]any
		Usage  struct {
			TokensPerMinute *tokens
			Day, Month      window
		}
	}
	get := func(a *accessStack, key string) answer {
		t.Helper()
		resp, b := a.call(t, "GET", "/v1/keys/self", key, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/keys/self = %d: %s", resp.StatusCode, b)
		}
		if key != "" && strings.Contains(string(b), key) {
			t.Errorf("the answer holds the key: %s", b)
		}
		var out answer
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	two, thirty := 2.0, 30.0
	got := get(a, keyAlice)
	want := answer{Name: "alice", Limits: map[string]any{"requestsPerMinute": 600.0, "concurrentLoops": nil, "tokensPerMinute": 1000.0,
		"usdPerDay": 2.0, "usdPerMonth": 30.0}}
	// 300 tokens charged a moment ago, 60 ms each: 300 in use, perhaps 299.
	want.Usage.TokensPerMinute = &tokens{Used: 300, Limit: 1000}
	if u := got.Usage.TokensPerMinute; u != nil && u.Used == 299 {
		want.Usage.TokensPerMinute.Used = 299
	}
	want.Usage.Day = window{USD: 0.125001, Limit: &two}
	want.Usage.Month = window{USD: 0.125001, Limit: &thirty}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("alice (-want +got):\n%s", diff)
	}

	got = get(a, keyBob)
	want = answer{Name: "bob", Limits: map[string]any{"requestsPerMinute": 600.0, "concurrentLoops": nil, "tokensPerMinute": nil,
		"usdPerDay": 2.0, "usdPerMonth": nil}}
	want.Usage.Day = window{Limit: &two}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bob (-want +got):\n%s", diff)
	}

	anon := keysStack(t, access.Options{InFlightSamples: 4})
	got = get(anon, "")
	want = answer{Name: "anonymous", Limits: map[string]any{"requestsPerMinute": nil, "concurrentLoops": nil, "tokensPerMinute": nil,
		"usdPerDay": nil, "usdPerMonth": nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("anonymous (-want +got):\n%s", diff)
	}
	if resp, _ := a.call(t, "GET", "/v1/keys/self", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", resp.StatusCode)
	}
}

// TestBudgetRefusalIs429: a model call refused by the caller's budget is
// a 429 problem with limit budget and Retry-After, on sampled's routes
// (before or after an event stream would start) and in OpenAI's shape
// under /openai/v1.
func TestBudgetRefusalIs429(t *testing.T) {
	a := keysStack(t, access.Options{Keys: []access.Key{{Name: "alice", Digest: access.HashKey(keyAlice)}}})
	for _, tt := range []struct{ path, body string }{
		{"/v1/sample", `{"prompt":"hi","model":"budget/m"}`},
		{"/v1/sample", `{"prompt":"hi","model":"budget/m","stream":true}`},
		{"/v1/sample/schema", `{"prompt":"hi","model":"budget/m","schema":{"type":"object"}}`},
		{"/v1/messages", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":20,"modelPreferences":{"hints":[{"name":"budget/m"}]}}`},
		{"/openai/v1/chat/completions", `{"model":"budget/m","messages":[{"role":"user","content":"hi"}]}`},
		{"/openai/v1/chat/completions", `{"model":"budget/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		var (
			resp *http.Response
			b    []byte
		)
		if strings.HasPrefix(tt.path, openaiPrefix) {
			// OpenAI's dialect is OpenAI's document's, not ours.
			resp, b = postRaw(t, a.url+tt.path, keyAlice, tt.body)
		} else {
			resp, b = a.call(t, "POST", tt.path, keyAlice, tt.body)
		}
		var p struct {
			Limit string
			Error struct{ Code string }
		}
		_ = json.Unmarshal(b, &p)
		if tt.path == "/openai/v1/chat/completions" {
			p.Limit = map[string]string{"rate_limit_exceeded": "budget"}[p.Error.Code]
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5401" || p.Limit != "budget" {
			t.Errorf("%s %s: %d, Retry-After %q, %s; want 429, 5401 and limit budget", tt.path, tt.body, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
}

// postRaw posts body with the bearer key and returns the answer.
func postRaw(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
