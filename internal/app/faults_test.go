package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testnet"
)

// faultKey is the API key the matrix configures. Fakes echo it in their
// error bodies, as real providers echo a wrong key; it must never reach the
// client.
const faultKey = "sk-fault-0123456789-SECRET"

// Timeouts of the matrix. The scenarios of a slow upstream get short ones,
// so that the matrix runs in seconds; the others get loose ones, which a
// busy machine does not reach, so that no scenario but those times out.
// The request's deadline leaves room for the fallback after three attempts.
const (
	faultHeaderTimeout  = 500 * time.Millisecond
	faultCallTimeout    = 1 * time.Second
	looseTimeout        = 10 * time.Second
	faultRequestTimeout = 20 * time.Second
	// faultSlack is added to every expected upper bound: a busy two-core
	// machine running -race.
	faultSlack = 4 * time.Second
	// faultConcurrency is how many scenarios run at once.
	faultConcurrency = 8
)

// wire is one adapter's wire format, as its fake upstream speaks it.
type wire struct {
	typ string
	// base turns the fake's URL into the configured endpoint; path is
	// where the adapter posts.
	base func(url string) string
	path string
	// ok is a 200 answer; hugePrefix and hugeSuffix enclose the long text
	// of an answer over sampler.MaxReplyBytes.
	ok, hugePrefix, hugeSuffix string
	// errBody is the provider's error object with that message.
	errBody func(typ, msg string) string
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var wires = []wire{{
	typ:  config.TypeOpenAI,
	base: func(u string) string { return u + "/v1" },
	path: "/v1/chat/completions",
	ok: `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
	hugePrefix: `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"`,
	hugeSuffix: `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
	errBody: func(typ, msg string) string {
		return `{"error":{"message":` + jsonString(msg) + `,"type":` + jsonString(typ) + `,"param":null,"code":null}}`
	},
}, {
	typ:  config.TypeAnthropic,
	base: func(u string) string { return u },
	path: "/v1/messages",
	ok: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
		`"content":[{"type":"text","text":"Hello there."}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":9,"output_tokens":3}}`,
	hugePrefix: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"`,
	hugeSuffix: `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":3}}`,
	errBody: func(typ, msg string) string {
		return `{"type":"error","error":{"type":` + jsonString(typ) + `,"message":` + jsonString(msg) + `},"request_id":"req_1"}`
	},
}, {
	typ:  config.TypeOllama,
	base: func(u string) string { return u },
	path: "/api/chat",
	ok: `{"model":"llama3.2","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"Hello there."},` +
		`"done":true,"done_reason":"stop","prompt_eval_count":9,"eval_count":3}`,
	hugePrefix: `{"model":"llama3.2","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"`,
	hugeSuffix: `"},"done":true,"done_reason":"stop","prompt_eval_count":9,"eval_count":3}`,
	errBody:    func(_, msg string) string { return `{"error":` + jsonString(msg) + `}` },
}}

// fake is an upstream that answers each request with a fault. It counts
// requests; stop releases handlers that hold a request open.
type fake struct {
	srv   *httptest.Server
	calls atomic.Int32
	stop  chan struct{}
}

// fault answers the n-th request (1-based) of a fake speaking w.
type fault func(f *fake, w wire, rw http.ResponseWriter, r *http.Request, n int)

func newFake(t *testing.T, wr wire, fn fault) *fake {
	f := &fake{stop: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := int(f.calls.Add(1))
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost || r.URL.Path != wr.path {
			t.Errorf("fake %s: got %s %s, want POST %s", wr.typ, r.Method, r.URL.Path, wr.path)
		}
		fn(f, wr, rw, r, n)
	}))
	// Cleanups run last-in first-out: held handlers are released before
	// Close waits for them.
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.stop) })
	return f
}

// hold blocks until the client goes away or the test ends.
func (f *fake) hold(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.stop:
	}
}

func answer(status int, header map[string]string, body func(w wire) string) fault {
	return func(_ *fake, w wire, rw http.ResponseWriter, _ *http.Request, _ int) {
		rw.Header().Set("Content-Type", "application/json")
		for k, v := range header {
			rw.Header().Set(k, v)
		}
		rw.WriteHeader(status)
		_, _ = io.WriteString(rw, body(w))
	}
}

func okBody(w wire) string { return w.ok }

// once answers the first request with fn and the others with 200.
func once(fn fault) fault {
	return func(f *fake, w wire, rw http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			fn(f, w, rw, r, n)
			return
		}
		answer(http.StatusOK, nil, okBody)(f, w, rw, r, n)
	}
}

// raw writes bytes on the hijacked connection and closes it: with a reset
// (RST) when reset is set, else with an orderly close (FIN).
func raw(t *testing.T, reset bool, text func(w wire) string) fault {
	return func(_ *fake, w wire, rw http.ResponseWriter, _ *http.Request, _ int) {
		conn, buf, err := http.NewResponseController(rw).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_, _ = buf.WriteString(text(w))
		_ = buf.Flush()
		if tc, ok := conn.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// headersAnd writes a 200's headers, flushed, then calls rest.
func headersAnd(rest func(f *fake, w wire, rw http.ResponseWriter, r *http.Request)) fault {
	return func(f *fake, w wire, rw http.ResponseWriter, r *http.Request, _ int) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(rw).Flush()
		rest(f, w, rw, r)
	}
}

// faultCase is one fault and what the client must see.
type faultCase struct {
	name  string
	fault fault
	// refused makes the endpoint a closed port instead of the fake.
	refused bool
	status  int
	// problem is the problem type's slug; "" for a 200.
	problem string
	// retries are the upstream retries counted, by reason.
	retries map[string]float64
	// fallback: a model with a fallback is answered by it.
	fallback bool
	// detail is a text the problem's detail must hold.
	detail string
	// retryAfter is the Retry-After the client must get, "" for none.
	retryAfter string
	// atLeast and within bound the request's duration; within gets
	// faultSlack on top.
	atLeast, within time.Duration
	// slow marks the scenarios of a slow upstream: they run with
	// faultHeaderTimeout and faultCallTimeout, the others with
	// looseTimeout.
	slow bool
}

func faultCases(t *testing.T) []faultCase {
	status := func(code int, typ, msg string, header map[string]string) fault {
		return answer(code, header, func(w wire) string { return w.errBody(typ, msg) })
	}
	backoff := 750 * time.Millisecond // two retries' full-jitter waits at most
	return []faultCase{
		{name: "upstream down: connection refused", refused: true,
			status: 502, problem: "upstream-error", retries: map[string]float64{"connection": 2}, fallback: true, within: backoff},
		{name: "connection reset before the headers ended", fault: raw(t, true, func(wire) string { return "HTTP/1.1 200 OK\r\nContent-Type: appl" }),
			status: 502, problem: "upstream-error", retries: map[string]float64{"connection": 2}, fallback: true, within: backoff},
		{name: "connection reset in the middle of the answer", fault: raw(t, true, func(w wire) string {
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(w.ok), w.ok[:len(w.ok)/2])
		}), status: 502, problem: "upstream-error", retries: map[string]float64{"connection": 2}, fallback: true, within: backoff},
		{name: "answer cut short: shorter than its Content-Length", fault: raw(t, false, func(w wire) string {
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(w.ok), w.ok[:len(w.ok)/2])
		}), status: 502, problem: "upstream-error", retries: map[string]float64{"connection": 2}, fallback: true, within: backoff},
		{name: "upstream 500 internal server error", fault: status(500, "api_error", "Internal server error", nil),
			status: 502, problem: "upstream-error", retries: map[string]float64{"server_error": 2}, fallback: true, detail: "status 500", within: backoff},
		{name: "upstream 502 bad gateway from its proxy", fault: answer(502, map[string]string{"Content-Type": "text/html"}, func(wire) string { return "<html><body>502 Bad Gateway</body></html>" }),
			status: 502, problem: "upstream-error", retries: map[string]float64{"server_error": 2}, fallback: true, detail: "status 502", within: backoff},
		{name: "upstream 503 overloaded", fault: status(503, "overloaded_error", "Overloaded", nil),
			status: 503, problem: "upstream-unavailable", retries: map[string]float64{"server_error": 2}, fallback: true, detail: "status 503", within: backoff},
		{name: "upstream 504 gateway timeout from its proxy", fault: status(504, "api_error", "upstream timed out", nil),
			status: 502, problem: "upstream-error", retries: map[string]float64{"server_error": 2}, fallback: true, detail: "status 504", within: backoff},
		{name: "rate limited (429) without Retry-After", fault: status(429, "rate_limit_error", "Rate limit reached", nil),
			status: 503, problem: "upstream-unavailable", retries: map[string]float64{"rate_limited": 2}, fallback: true, detail: "Rate limit reached", within: backoff},
		{name: "rate limited (429) once with Retry-After 1 s, then answered", fault: once(status(429, "rate_limit_error", "Rate limit reached", map[string]string{"Retry-After": "1"})),
			status: 200, retries: map[string]float64{"rate_limited": 1}, atLeast: time.Second, within: time.Second},
		{name: "rate limited (429) once with Retry-After as an HTTP date, then answered", fault: once(func(f *fake, w wire, rw http.ResponseWriter, r *http.Request, n int) {
			// The next whole second but one: a wait of more than 1 s.
			at := time.Now().Truncate(time.Second).Add(2 * time.Second)
			status(429, "rate_limit_error", "Rate limit reached", map[string]string{"Retry-After": at.UTC().Format(http.TimeFormat)})(f, w, rw, r, n)
		}), status: 200, retries: map[string]float64{"rate_limited": 1}, atLeast: time.Second, within: 2 * time.Second},
		{name: "rate limited (429) for an hour: answered at once with its Retry-After", fault: status(429, "rate_limit_error", "Rate limit reached", map[string]string{"Retry-After": "3600"}),
			status: 503, problem: "upstream-unavailable", retries: map[string]float64{}, fallback: true, retryAfter: "3600"},
		{name: "wrong API key (401): not retried, the provider's message", fault: func(f *fake, w wire, rw http.ResponseWriter, r *http.Request, n int) {
			// Providers echo the key they were sent.
			key := r.Header.Get("X-Api-Key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			status(401, "authentication_error", "Incorrect API key provided: "+key, nil)(f, w, rw, r, n)
		},
			status: 502, problem: "upstream-error", retries: map[string]float64{}, detail: "Incorrect API key provided"},
		{name: "forbidden (403): not retried, the provider's message", fault: status(403, "permission_error", "This key may not use this model", nil),
			status: 502, problem: "upstream-error", retries: map[string]float64{}, detail: "This key may not use this model"},
		{name: "request refused (400) with the provider's error", fault: status(400, "invalid_request_error", "max_tokens: too large for this model", nil),
			status: 502, problem: "upstream-error", retries: map[string]float64{}, detail: "max_tokens: too large for this model"},
		{name: "answer is not JSON", fault: answer(200, nil, func(wire) string { return `{"id": "x", oops` }),
			status: 502, problem: "upstream-error", retries: map[string]float64{}},
		{name: "answer is a JSON error object with status 200", fault: answer(200, nil, func(w wire) string { return w.errBody("api_error", "model is loading, try later") }),
			status: 502, problem: "upstream-error", retries: map[string]float64{}, detail: "model is loading, try later"},
		{name: "no headers within responseHeaderTimeout", fault: func(f *fake, _ wire, _ http.ResponseWriter, r *http.Request, _ int) { f.hold(r) },
			status: 504, problem: "upstream-timeout", retries: map[string]float64{"timeout": 2}, fallback: true, within: 3*faultHeaderTimeout + backoff, slow: true},
		{name: "headers, then nothing until callTimeout", fault: headersAnd(func(f *fake, _ wire, _ http.ResponseWriter, r *http.Request) { f.hold(r) }),
			status: 504, problem: "upstream-timeout", retries: map[string]float64{"timeout": 2}, fallback: true, within: 3*faultCallTimeout + backoff, slow: true},
		{name: "answer trickling in past callTimeout", fault: headersAnd(func(f *fake, w wire, rw http.ResponseWriter, r *http.Request) {
			tick := time.NewTicker(faultCallTimeout / 10)
			defer tick.Stop()
			rc := http.NewResponseController(rw)
			// Each byte comes in time; the whole answer never does.
			for i := 0; ; i = (i + 1) % len(w.ok) {
				select {
				case <-r.Context().Done():
					return
				case <-f.stop:
					return
				case <-tick.C:
					_, _ = io.WriteString(rw, w.ok[i:i+1])
					_ = rc.Flush()
				}
			}
		}), status: 504, problem: "upstream-timeout", retries: map[string]float64{"timeout": 2}, fallback: true, within: 3*faultCallTimeout + backoff, slow: true},
		{name: "answer over 16 MiB announced by its Content-Length", fault: func(_ *fake, w wire, rw http.ResponseWriter, _ *http.Request, _ int) {
			rw.Header().Set("Content-Type", "application/json")
			rw.Header().Set("Content-Length", fmt.Sprint(sampler.MaxReplyBytes+1))
			rw.WriteHeader(http.StatusOK)
			// The client reads none of it: the start is enough to tell.
			_, _ = io.WriteString(rw, w.hugePrefix)
		}, status: 502, problem: "upstream-error", retries: map[string]float64{}, detail: "16 MiB"},
		{name: "answer over 16 MiB streamed", fault: headersAnd(func(_ *fake, w wire, rw http.ResponseWriter, _ *http.Request) {
			bw := bufio.NewWriterSize(rw, 64<<10)
			_, _ = bw.WriteString(w.hugePrefix)
			chunk := strings.Repeat("a", 64<<10)
			for n := 0; n <= sampler.MaxReplyBytes; n += len(chunk) {
				if _, err := bw.WriteString(chunk); err != nil {
					return // the client stopped reading
				}
			}
			_, _ = bw.WriteString(w.hugeSuffix)
			_ = bw.Flush()
		}), status: 502, problem: "upstream-error", retries: map[string]float64{}, detail: "16 MiB", within: looseTimeout},
	}
}

// TestFaultMatrix runs every upstream fault against every adapter's wire
// format through the assembled service, twice: on a model without fallback
// (provider "up") and on one whose fallback is the offline provider
// (provider "backed"). It checks the client's status and problem, the
// request's duration, the retries counted, the fallback, that the API key
// never reaches the client, and that no goroutine outlives the matrix.
//
// The scenarios mostly wait on timers, so several run at once (t.Run from
// goroutines; -parallel would allow two at a time on two cores).
func TestFaultMatrix(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	var wg sync.WaitGroup
	// A few at a time: the timeouts are short, and a machine busy with
	// dozens of them would miss them.
	slots := make(chan struct{}, faultConcurrency)
	// The slow upstreams' scenarios run after the others: their timeouts
	// are half a second, and the 16 MiB answers (seconds of CPU under
	// -race) would starve them into timing out before a call is sent.
	for _, slow := range []bool{false, true} {
		for _, wr := range wires {
			for _, fc := range faultCases(t) {
				if fc.slow != slow {
					continue
				}
				wg.Go(func() {
					slots <- struct{}{}
					defer func() { <-slots }()
					t.Run(wr.typ+"/"+fc.name, func(t *testing.T) { runFault(t, wr, fc) })
				})
			}
		}
		wg.Wait()
	}
	if t.Failed() {
		return
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left after the matrix: %v", err)
	}
}

func runFault(t *testing.T, wr wire, fc faultCase) {
	endpoint := func() (string, *fake) {
		if fc.refused {
			return wr.base("http://" + testnet.RefusingAddr(t)), nil
		}
		f := newFake(t, wr, fc.fault)
		return wr.base(f.srv.URL), f
	}
	callTimeout, headerTimeout := looseTimeout, looseTimeout
	if fc.slow {
		callTimeout, headerTimeout = faultCallTimeout, faultHeaderTimeout
	}
	upURL, upFake := endpoint()
	backedURL, backedFake := endpoint()
	yaml := fmt.Sprintf(`callTimeout: %s
requestTimeout: %s
responseHeaderTimeout: %s
providers:
  - name: up
    type: %[4]s
    endpoint: %[5]s
    apiKeyEnv: FAULT_KEY
    models: [{name: m}]
  - name: backed
    type: %[4]s
    endpoint: %[6]s
    apiKeyEnv: FAULT_KEY
    models: [{name: m, fallbacks: [offline/default]}]
`, callTimeout, faultRequestTimeout, headerTimeout, wr.typ, upURL, backedURL)
	env := map[string]string{"SAMPLED_CONFIG": "faults.yaml", "FAULT_KEY": faultKey}
	cfg := loadConfig(t, env, yaml)
	reg := prometheus.NewRegistry()
	a, err := New(context.Background(), Options{Config: cfg, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	client := &http.Client{Timeout: faultRequestTimeout + faultSlack}

	type outcome struct {
		status               int
		contentType, problem string
		detail, provider     string
		retryAfter           string
		body                 string
		took                 time.Duration
		err                  error
	}
	do := func(model string) (o outcome) {
		start := time.Now()
		defer func() { o.took = time.Since(start) }()
		resp, err := client.Post(srv.URL+"/v1/sample", "application/json",
			strings.NewReader(`{"prompt":"Say hello.","model":"`+model+`","maxTokens":64}`))
		if err != nil {
			o.err = err
			return o
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			o.err = err
			return o
		}
		var body struct {
			Type, Detail, Provider string
		}
		_ = json.Unmarshal(b, &body)
		return outcome{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"),
			problem: strings.TrimPrefix(body.Type, "https://sampled.dev/problems/"), detail: body.Detail,
			provider: body.Provider, retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
	}
	// The two models' requests run side by side.
	var backed outcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		backed = do("backed/m")
	}()
	up := do("up/m")
	<-done

	for _, c := range []struct {
		model string
		o     outcome
	}{{"up/m", up}, {"backed/m", backed}} {
		o := c.o
		if o.err != nil {
			t.Errorf("%s: %v (hung?)", c.model, o.err)
			continue
		}
		if strings.Contains(o.body, faultKey) {
			t.Errorf("%s: the API key reaches the client: %s", c.model, o.body)
		}
		if limit := fc.within + faultSlack; o.took > limit {
			t.Errorf("%s: took %s, want at most %s", c.model, o.took, limit)
		}
	}
	o := up
	if o.err == nil {
		// What the operator sees, for go test -v.
		t.Logf("up/m: %d %s in %s: %s", o.status, o.problem, o.took.Round(time.Millisecond), o.detail)
		if o.status != fc.status || o.problem != fc.problem {
			t.Errorf("up/m: got %d %q, want %d %q; body %s", o.status, o.problem, fc.status, fc.problem, o.body)
		}
		if fc.status != 200 && o.contentType != "application/problem+json" {
			t.Errorf("up/m: Content-Type %q, want application/problem+json", o.contentType)
		}
		if fc.status == 200 && o.provider != "up" {
			t.Errorf("up/m: answered by %q, want up; body %s", o.provider, o.body)
		}
		if !strings.Contains(o.detail, fc.detail) {
			t.Errorf("up/m: detail %q does not say %q", o.detail, fc.detail)
		}
		if o.retryAfter != fc.retryAfter {
			t.Errorf("up/m: Retry-After %q, want %q", o.retryAfter, fc.retryAfter)
		}
		if o.took < fc.atLeast {
			t.Errorf("up/m: took %s, want at least %s (the wait the upstream asked for)", o.took, fc.atLeast)
		}
	}
	if o := backed; o.err == nil {
		switch {
		case fc.fallback && (o.status != 200 || o.provider != "offline"):
			t.Errorf("backed/m: got %d from %q, want 200 from the fallback offline/default; body %s", o.status, o.provider, o.body)
		case !fc.fallback && (o.status != fc.status || o.problem != fc.problem):
			t.Errorf("backed/m: got %d %q, want %d %q without fallback; body %s", o.status, o.problem, fc.status, fc.problem, o.body)
		}
	}

	// Retries counted, by provider and reason; and the calls the fakes saw.
	want := 1.0
	for _, n := range fc.retries {
		want += n
	}
	for _, p := range []struct {
		name string
		f    *fake
	}{{"up", upFake}, {"backed", backedFake}} {
		got := retriesBy(t, reg, p.name)
		if fmt.Sprint(got) != fmt.Sprint(fc.retries) {
			t.Errorf("%s: sampled_upstream_retries_total by reason = %v, want %v", p.name, got, fc.retries)
		}
		if p.f != nil {
			// A call cut by a timeout has been written to the fake but its
			// handler may run later on a busy machine: the count can only
			// catch up, so poll it for a while before comparing.
			for deadline := time.Now().Add(faultSlack); float64(p.f.calls.Load()) < want && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := float64(p.f.calls.Load()); n != want {
				t.Errorf("%s: the upstream saw %v calls, want %v", p.name, n, want)
			}
		}
	}
}

// retriesBy returns the sampled_upstream_retries_total series of provider,
// by reason.
func retriesBy(t *testing.T, reg *prometheus.Registry, provider string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sampled_upstream_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if v := m.GetCounter().GetValue(); labels["provider"] == provider && v != 0 { // the series exist at 0
				got[labels["reason"]] += v
			}
		}
	}
	return got
}
