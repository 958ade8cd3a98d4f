package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testlog"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// The keys of the access tests, and their names.
const (
	keyAlice = "alice-key-5c1d0e"
	keyBob   = "bob-key-93ab77"
)

// accessStack is the whole service with API keys alice and bob, its log
// captured.
type accessStack struct {
	*stack
	log   *testlog.Buffer
	guard *access.Guard
}

func startAccessStack(t *testing.T, o access.Options, metricsNeedKey bool) *accessStack {
	t.Helper()
	if o.Keys == nil {
		o.Keys = []access.Key{{Name: "alice", Digest: access.HashKey(keyAlice)}, {Name: "bob", Digest: access.HashKey(keyBob)}}
	}
	g, err := access.New(o)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	st := startStackWith(t, stackOptions{extra: []sampler.Provider{contractHang{}}, loop: loop.Options{Access: g}, cfg: func(c *Config) {
		c.Access, c.MetricsNeedKey = g, metricsNeedKey
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}})
	st.metrics.AccessKeys(g.Names())
	return &accessStack{stack: st, log: logs, guard: g}
}

// call sends a request with the key (none when empty), checks the exchange
// against api/openapi.yaml and returns the response and its body.
func (a *accessStack) call(t *testing.T, method, path, key, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, a.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var reqBody []byte
	if body != "" {
		reqBody = []byte(body)
	}
	checkResponse(t, req, reqBody, resp, b)
	return resp, b
}

// problemType is the type member of a problem body.
func problemType(t *testing.T, b []byte) string {
	t.Helper()
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not a problem: %s", b)
	}
	return p.Type
}

func TestAuthenticate(t *testing.T) {
	a := startAccessStack(t, access.Options{}, false)
	tests := []struct {
		name      string
		method    string
		path      string
		key       string
		header    string // Authorization as sent, when not "Bearer key"
		want      int
		challenge string
	}{
		{name: "no key", method: "GET", path: "/v1/models", want: 401, challenge: `Bearer realm="sampled"`},
		{name: "wrong key", method: "GET", path: "/v1/models", key: "not-a-key", want: 401, challenge: `Bearer realm="sampled", error="invalid_token"`},
		{name: "basic", method: "GET", path: "/v1/models", header: "Basic " + keyAlice, want: 401, challenge: `Bearer realm="sampled"`},
		{name: "key as is", method: "GET", path: "/v1/models", header: keyAlice, want: 401, challenge: `Bearer realm="sampled"`},
		{name: "right key", method: "GET", path: "/v1/models", key: keyAlice, want: 200},
		{name: "other right key", method: "POST", path: "/v1/sample", key: keyBob, want: 200},
		{name: "sample without key", method: "POST", path: "/v1/sample", want: 401, challenge: `Bearer realm="sampled"`},
		{name: "loops without key", method: "GET", path: "/v1/loops", want: 401, challenge: `Bearer realm="sampled"`},
		{name: "unknown route without key", method: "GET", path: "/v1/nothing", want: 401, challenge: `Bearer realm="sampled"`},
		{name: "healthz open", method: "GET", path: "/healthz", want: 200},
		{name: "readyz open", method: "GET", path: "/readyz", want: 200},
		{name: "openapi open", method: "GET", path: "/openapi.yaml", want: 200},
		{name: "metrics open by default", method: "GET", path: "/metrics", want: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, a.url+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			var body []byte
			if tt.method == "POST" {
				body = []byte(`{"prompt":"hi"}`)
				req.Body = io.NopCloser(bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
			}
			switch {
			case tt.header != "":
				req.Header.Set("Authorization", tt.header)
			case tt.key != "":
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := a.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
			if tt.want == 401 {
				if got := problemType(t, b); got != problemBase+"unauthorized" {
					t.Errorf("problem type %q", got)
				}
				if got := resp.Header.Get("Content-Type"); got != "application/problem+json" {
					t.Errorf("Content-Type %q", got)
				}
			}
			if tt.path != "/v1/nothing" {
				checkResponse(t, req, body, resp, b)
			}
		})
	}
	if got := testutil.ToFloat64(a.metrics.AccessDenied.WithLabelValues("bad_key")); got != 1 {
		t.Errorf("sampled_access_denied_total{reason=bad_key} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(a.metrics.AccessDenied.WithLabelValues("no_key")); got != 6 {
		t.Errorf("sampled_access_denied_total{reason=no_key} = %v, want 6", got)
	}
	if got := testutil.ToFloat64(a.metrics.AccessRequests.WithLabelValues("alice")); got != 1 {
		t.Errorf("sampled_access_requests_total{key=alice} = %v, want 1", got)
	}

	closed := startAccessStack(t, access.Options{}, true)
	if resp, _ := closed.call(t, "GET", "/metrics", "", ""); resp.StatusCode != 401 {
		t.Errorf("metricsNeedKey: GET /metrics without a key: %d, want 401", resp.StatusCode)
	}
	if resp, _ := closed.call(t, "GET", "/metrics", keyBob, ""); resp.StatusCode != 200 {
		t.Errorf("metricsNeedKey: GET /metrics with a key: %d, want 200", resp.StatusCode)
	}
}

// TestKeyNeverLogged checks that the log names the caller's key, never the
// key itself, whether it was right or wrong.
func TestKeyNeverLogged(t *testing.T) {
	a := startAccessStack(t, access.Options{}, false)
	const wrong = "wrong-key-looks-real-0042"
	a.call(t, "POST", "/v1/sample", keyAlice, `{"prompt":"hi"}`)
	a.call(t, "GET", "/v1/models", wrong, "")
	a.call(t, "POST", "/v1/loops", keyBob, `{"prompt":"hi"}`)
	testwait.Poll(t, time.Millisecond, 10*time.Second, "three request log lines", func() bool {
		return strings.Count(a.log.String(), `"msg":"request"`) >= 3
	})
	out := a.log.String()
	for _, secret := range []string{keyAlice, keyBob, wrong} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds the key %q:\n%s", secret, out)
		}
	}
	var keys []string
	for line := range strings.Lines(out) {
		var rec struct {
			Msg    string `json:"msg"`
			Route  string `json:"route"`
			Status int    `json:"status"`
			Key    string `json:"key"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" {
			keys = append(keys, rec.Route+" "+strconv.Itoa(rec.Status)+" "+rec.Key)
		}
	}
	slices.Sort(keys)
	want := []string{"/v1/loops 201 bob", "/v1/sample 200 alice", "unmatched 401 "}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("request log lines (route status key) (-want +got):\n%s", diff)
	}
}

// TestOwnership checks that a run belongs to the key that started it:
// another key gets 404 for its state, its events and DELETE, and lists
// only its own runs.
func TestOwnership(t *testing.T) {
	a := startAccessStack(t, access.Options{}, false)
	start := func(key string) string {
		resp, b := a.call(t, "POST", "/v1/loops", key, `{"prompt":"a","model":"hang/m"}`)
		if resp.StatusCode != 201 {
			t.Fatalf("start: %d %s", resp.StatusCode, b)
		}
		var out struct{ ID string }
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out.ID
	}
	aliceRun, bobRun := start(keyAlice), start(keyBob)
	aliceRun2 := start(keyAlice)

	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/loops/" + aliceRun},
		{"GET", "/v1/loops/" + aliceRun + "/events"},
		{"DELETE", "/v1/loops/" + aliceRun},
	} {
		resp, b := a.call(t, c.method, c.path, keyBob, "")
		if resp.StatusCode != 404 || problemType(t, b) != problemBase+"loop-not-found" {
			t.Errorf("bob %s %s: %d %s; want 404 loop-not-found", c.method, c.path, resp.StatusCode, b)
		}
		// The same answer as a loop that does not exist: nothing tells
		// the two apart.
		_, none := a.call(t, c.method, strings.Replace(c.path, aliceRun, "loop_0000000000000000", 1), keyBob, "")
		var got, want map[string]any
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal(none, &want)
		delete(got, "detail")
		delete(got, "instance")
		delete(want, "detail")
		delete(want, "instance")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s %s of another key differs from a missing loop (-missing +other):\n%s", c.method, c.path, diff)
		}
	}
	// Alice's run is still running: bob's DELETE did nothing.
	resp, b := a.call(t, "GET", "/v1/loops/"+aliceRun, keyAlice, "")
	var run struct{ Status, Owner string }
	if err := json.Unmarshal(b, &run); err != nil || resp.StatusCode != 200 || run.Status != "running" || run.Owner != "alice" {
		t.Errorf("alice GET her run: %d %s; want 200 running, owner alice", resp.StatusCode, b)
	}

	list := func(key string) []string {
		resp, b := a.call(t, "GET", "/v1/loops", key, "")
		if resp.StatusCode != 200 {
			t.Fatalf("list: %d %s", resp.StatusCode, b)
		}
		var out struct{ Loops []struct{ ID, Owner string } }
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, l := range out.Loops {
			ids = append(ids, l.ID+" "+l.Owner)
		}
		return ids
	}
	if diff := cmp.Diff([]string{aliceRun2 + " alice", aliceRun + " alice"}, list(keyAlice)); diff != "" {
		t.Errorf("alice's list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{bobRun + " bob"}, list(keyBob)); diff != "" {
		t.Errorf("bob's list (-want +got):\n%s", diff)
	}

	// The owner can follow and cancel.
	if resp, b := a.call(t, "DELETE", "/v1/loops/"+aliceRun, keyAlice, ""); resp.StatusCode != 202 {
		t.Errorf("alice DELETE her run: %d %s", resp.StatusCode, b)
	}
	if resp, b := a.call(t, "GET", "/v1/loops/"+aliceRun+"/events", keyAlice, ""); resp.StatusCode != 200 || !bytes.Contains(b, []byte("loop.completed")) {
		t.Errorf("alice follows her cancelled run: %d %s", resp.StatusCode, b)
	}
}

// TestRateLimits checks the 429s: a key past its requests per minute, a
// key at its concurrent loops, and every caller past the global cap on
// in-flight sampling requests.
func TestRateLimits(t *testing.T) {
	t.Run("requests per minute", func(t *testing.T) {
		a := startAccessStack(t, access.Options{RequestsPerMinute: 2}, false)
		// 2 a minute: a burst of one, then one every 30 s.
		if resp, b := a.call(t, "GET", "/v1/models", keyAlice, ""); resp.StatusCode != 200 {
			t.Fatalf("first request: %d %s", resp.StatusCode, b)
		}
		resp, b := a.call(t, "GET", "/v1/models", keyAlice, "")
		wantTooMany(t, resp, b, "requests", 30)
		// Bob has a rate of his own, and health checks take none.
		if resp, _ := a.call(t, "GET", "/v1/models", keyBob, ""); resp.StatusCode != 200 {
			t.Errorf("bob after alice's limit: %d", resp.StatusCode)
		}
		if resp, _ := a.call(t, "GET", "/healthz", keyAlice, ""); resp.StatusCode != 200 {
			t.Errorf("healthz past alice's rate: %d", resp.StatusCode)
		}
		if got := testutil.ToFloat64(a.metrics.RateLimited.WithLabelValues("alice", "requests")); got != 1 {
			t.Errorf("sampled_rate_limited_total{key=alice,limit=requests} = %v, want 1", got)
		}
	})

	t.Run("concurrent loops", func(t *testing.T) {
		a := startAccessStack(t, access.Options{ConcurrentLoops: 2}, false)
		var ids []string
		for range 2 {
			resp, b := a.call(t, "POST", "/v1/loops", keyAlice, `{"prompt":"a","model":"hang/m"}`)
			if resp.StatusCode != 201 {
				t.Fatalf("loop: %d %s", resp.StatusCode, b)
			}
			var out struct{ ID string }
			_ = json.Unmarshal(b, &out)
			ids = append(ids, out.ID)
		}
		resp, b := a.call(t, "POST", "/v1/loops", keyAlice, `{"prompt":"a","model":"hang/m"}`)
		wantTooMany(t, resp, b, "loops", 5)
		if resp, _ := a.call(t, "POST", "/v1/loops", keyBob, `{"prompt":"a","model":"hang/m"}`); resp.StatusCode != 201 {
			t.Errorf("bob's loop while alice is at her limit: %d", resp.StatusCode)
		}
		// A refused start (400) takes no slot.
		if resp, _ := a.call(t, "POST", "/v1/loops", keyBob, `{"prompt":"a","model":"hang/m","maxIterations":0}`); resp.StatusCode != 400 {
			t.Errorf("bad loop: %d, want 400", resp.StatusCode)
		}
		// Once a loop ends, its slot is free again.
		if resp, _ := a.call(t, "DELETE", "/v1/loops/"+ids[0], keyAlice, ""); resp.StatusCode != 202 {
			t.Fatalf("cancel: %d", resp.StatusCode)
		}
		alice, _ := a.guard.Authenticate("Bearer " + keyAlice)
		testwait.Poll(t, time.Millisecond, 10*time.Second, "alice's cancelled loop to end", func() bool { return alice.Loops() == 1 })
		if resp, b := a.call(t, "POST", "/v1/loops", keyAlice, `{"prompt":"a","model":"hang/m"}`); resp.StatusCode != 201 {
			t.Errorf("alice's loop after one ended: %d %s", resp.StatusCode, b)
		}
		bob, _ := a.guard.Authenticate("Bearer " + keyBob)
		if bob.Loops() != 1 {
			t.Errorf("bob has %d loops counted, want 1", bob.Loops())
		}
	})

	t.Run("global in-flight sampling cap", func(t *testing.T) {
		a := startAccessStack(t, access.Options{InFlightSamples: 1}, false)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// Alice's request to the hanging model holds the one place.
		held := make(chan struct{})
		go func() {
			defer close(held)
			req, _ := http.NewRequestWithContext(ctx, "POST", a.url+"/v1/sample", strings.NewReader(`{"prompt":"a","model":"hang/m"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+keyAlice)
			if resp, err := a.srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		testwait.Poll(t, time.Millisecond, 10*time.Second, "the hanging request in flight", func() bool { return a.guard.InFlight() == 1 })
		if got := testutil.ToFloat64(a.metrics.SamplingInFlight); got != 1 {
			t.Errorf("sampled_sampling_in_flight = %v, want 1", got)
		}
		for _, path := range []string{"/v1/sample", "/v1/sample/schema", "/v1/sample/tools", "/v1/messages", "/mcp"} {
			resp, b := a.call(t, "POST", path, keyBob, `{"prompt":"a"}`)
			wantTooMany(t, resp, b, "in_flight", 1)
		}
		// Other routes are not sampling requests.
		if resp, _ := a.call(t, "GET", "/v1/models", keyBob, ""); resp.StatusCode != 200 {
			t.Errorf("models while the cap is reached: %d", resp.StatusCode)
		}
		cancel()
		<-held
		testwait.Poll(t, time.Millisecond, 10*time.Second, "the cancelled request to leave", func() bool { return a.guard.InFlight() == 0 })
		if got := testutil.ToFloat64(a.metrics.SamplingInFlight); got != 0 {
			t.Errorf("sampled_sampling_in_flight = %v once the request left, want 0", got)
		}
		if resp, b := a.call(t, "POST", "/v1/sample", keyBob, `{"prompt":"a"}`); resp.StatusCode != 200 {
			t.Errorf("sample once the place is free: %d %s", resp.StatusCode, b)
		}
		if got := testutil.ToFloat64(a.metrics.RateLimited.WithLabelValues("bob", "in_flight")); got != 5 {
			t.Errorf("sampled_rate_limited_total{key=bob,limit=in_flight} = %v, want 5", got)
		}
	})
}

// wantTooMany checks a 429 problem naming the limit, with a Retry-After of
// at least 1 and at most the given seconds.
func wantTooMany(t *testing.T, resp *http.Response, b []byte, limit string, most int) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", resp.StatusCode, b)
	}
	var p struct {
		Type  string `json:"type"`
		Limit string `json:"limit"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Type != problemBase+"rate-limited" || p.Limit != limit {
		t.Errorf("problem %s, want type rate-limited with limit %q", b, limit)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > most {
		t.Errorf("Retry-After %q, want 1 to %d seconds", resp.Header.Get("Retry-After"), most)
	}
}

// TestNoKeysAsBefore checks that a service without keys serves everyone and
// keeps runs visible to every caller, as it did before keys existed.
func TestNoKeysAsBefore(t *testing.T) {
	a := startAccessStack(t, access.Options{Keys: []access.Key{}}, false)
	resp, b := a.call(t, "POST", "/v1/loops", "", `{"prompt":"a","model":"hang/m"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("loop without keys: %d %s", resp.StatusCode, b)
	}
	var out struct{ ID string }
	_ = json.Unmarshal(b, &out)
	for _, key := range []string{"", "anything"} {
		if resp, b := a.call(t, "GET", "/v1/loops/"+out.ID, key, ""); resp.StatusCode != 200 || bytes.Contains(b, []byte(`"owner"`)) {
			t.Errorf("GET with key %q: %d %s; want 200 without an owner", key, resp.StatusCode, b)
		}
	}
	if got := testutil.ToFloat64(a.metrics.AccessRequests.WithLabelValues("anonymous")); got != 3 {
		t.Errorf("sampled_access_requests_total{key=anonymous} = %v, want 3", got)
	}
}

// TestSpecSecurity checks that api/openapi.yaml requires the bearer scheme
// everywhere but on the paths the service serves without a key.
func TestSpecSecurity(t *testing.T) {
	doc := loadSpec(t)
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Fatalf("global security %v, want [{bearer: []}]", doc.Security)
	}
	scheme := doc.Components.SecuritySchemes["bearer"]
	if scheme == nil || scheme.Value.Type != "http" || scheme.Value.Scheme != "bearer" {
		t.Fatalf("components.securitySchemes.bearer = %+v, want type http, scheme bearer", scheme)
	}
	s := &server{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			open := op.Security != nil && len(*op.Security) == 0
			if open != s.openPath(path) {
				t.Errorf("%s %s: open in the document = %v, served without a key = %v", method, path, open, s.openPath(path))
			}
			if !open && op.Responses.Status(401) == nil {
				t.Errorf("%s %s needs a key but documents no 401", method, path)
			}
		}
	}
}
