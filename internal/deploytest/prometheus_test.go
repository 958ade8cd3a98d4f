package deploytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/redistest"
	"github.com/sampled/sampled/internal/testing/testnet"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// needProgram returns the path of an outside program, skipping the test
// when it is missing on a developer's machine; in CI a missing program is a
// failure.
func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI (apt-get install prometheus): %v", name, err)
		}
		t.Skipf("%s not found on PATH; install Debian's prometheus package to run this test", name)
	}
	return p
}

// flakyOpenAI is a fake OpenAI upstream whose every third call fails with a
// 500, so that upstream retries and errors show in the metrics.
func flakyOpenAI() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1)%3 == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"upstream hiccup","type":"server_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	}))
}

// lazySeriesTarget serves, in Prometheus' text format, the upstream call
// histogram of a provider "lazy" whose calls all succeed and whose "error"
// series was never created; every scrape counts one more call.
func lazySeriesTarget() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := n.Add(1)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		const series = `sampled_upstream_request_duration_seconds`
		const labels = `model="lazy/m",outcome="ok",provider="lazy"`
		fmt.Fprintf(w, "# HELP %s Upstream calls.\n# TYPE %s histogram\n", series, series)
		fmt.Fprintf(w, "%s_bucket{%s,le=\"+Inf\"} %d\n%s_sum{%s} %d\n%s_count{%s} %d\n", series, labels, c, series, labels, c, series, labels, c)
	}))
}

// TestDashboardAndAlertsAgainstPrometheus starts sampled and a real
// Prometheus scraping it every second, evaluates every dashboard panel on
// the idle service, drives a mixed load, then evaluates every panel and
// every alert expression again through Prometheus' HTTP API: each must
// return series.
func TestDashboardAndAlertsAgainstPrometheus(t *testing.T) {
	prom := needProgram(t, "prometheus")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	up := flakyOpenAI()
	defer up.Close()
	dir := t.TempDir()
	down := testnet.RefusingAddr(t) // calls fail with a 502: connection refused
	// The test MCP server, for a tool that fails.
	bin, err := mcptest.BuildServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Runs in Redis, for the dashboard's Redis row. The MCP server is
	// required: /readyz answers 200 once it is connected.
	cfg := fmt.Sprintf("redis:\n  url: unix://%s\n", redistest.Socket(t)) + fmt.Sprintf("mcpServers:\n  test:\n    command: %q\n    required: true\n", bin) + fmt.Sprintf("providers:\n  - name: openai\n    type: openai\n    endpoint: %s/v1\n    models:\n      - name: gpt-4o-mini\n        price: {input: 0.15, output: 0.6}\n"+
		"  - name: down\n    type: openai\n    endpoint: http://%s/v1\n    models:\n      - name: gone\n"+
		// A provider nothing calls: its error ratio is 0/0.
		"  - name: idle\n    type: ollama\n    endpoint: http://%s\n    models:\n      - name: unused\n", up.URL, down, down) +
		// The load's key, and one with a rate of 1 a minute for the 429s.
		"apiKeys:\n  - name: load\n    hash: sha256:fd52c3bcf1d6a473c274a3ec97f5976e15a937e15781b72b402048e071e45a3f\n    requestsPerMinute: 100000\n" +
		"  - name: tight\n    hash: sha256:b8ee3a6240fd78b3585e7004865fc33738434cc17ae9b31a177c46c88599bd33\n    requestsPerMinute: 1\n"
	if err := os.WriteFile(filepath.Join(dir, "sampled.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SAMPLED_CONFIG": filepath.Join(dir, "sampled.yaml")}
	c, err := config.Load(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Options{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	target := strings.TrimPrefix(srv.URL, "http://")
	testwait.Poll(t, 250*time.Millisecond, 30*time.Second, "the test MCP server to connect (/readyz)", func() bool {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	promAddr := freeAddr(t)
	rules, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	// A second job exposes the calls of a provider without any error
	// series (a process that creates series on first use), to check that
	// the error ratio still says 0.
	legacy := lazySeriesTarget()
	defer legacy.Close()
	promCfg := fmt.Sprintf("global:\n  scrape_interval: 250ms\n  evaluation_interval: 250ms\nrule_files: [%q]\nscrape_configs:\n  - job_name: sampled\n    static_configs:\n      - targets: [%q]\n"+
		"  - job_name: lazy\n    static_configs:\n      - targets: [%q]\n",
		filepath.Join(dir, "alerts.yml"), target, strings.TrimPrefix(legacy.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	var promLog strings.Builder
	cmd.Stdout, cmd.Stderr = &promLog, &promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", promLog.String())
		}
	}()
	api := "http://" + promAddr

	// Wait until Prometheus scrapes sampled.
	testwait.Poll(t, 250*time.Millisecond, 60*time.Second, "prometheus scraping sampled", func() bool {
		v, err := query(api, `up{job="sampled"}`)
		return err == nil && len(v) == 1 && v[0].Value[1] == "1"
	})

	// Idle: nothing but scrapes and readiness checks has reached sampled.
	// Once rates have two points, every panel shows data, zeros for what
	// did not happen: the series whose labels are known exist from the
	// start.
	testwait.Poll(t, 250*time.Millisecond, 60*time.Second, "three scrapes of the idle service", func() bool {
		v, err := query(api, `count_over_time(up{job="sampled"}[1m])`)
		return err == nil && len(v) == 1 && number(v[0]) >= 3
	})
	for _, e := range dashboardExprs(t) {
		t.Run("idle/panel/"+e.title, func(t *testing.T) {
			checkSeries(t, api, e.expr, true)
		})
	}
	// The series the load below adds to these counters must have existed
	// while idle: a label value counted but not created at start shows.
	startSeries := map[string]map[string]bool{}
	for _, q := range []string{
		`sampled_samples_total{outcome=~"ok|upstream_error|invalid_request"}`, `sampled_loops_total`, `sampled_tool_calls_total{tool!="other"}`,
		`sampled_sse_events_total`, `sampled_upstream_retries_total`, `sampled_validation_failures_total`,
	} {
		startSeries[q] = seriesSet(t, api, q)
	}

	drive(t, srv.URL)
	// Let several scrapes see the load, so rates over 1m have two points.
	testwait.Poll(t, 250*time.Millisecond, 60*time.Second, "the load to be scraped", func() bool {
		v, err := query(api, `count_over_time(sampled_loops_total{status="completed"}[1m])`)
		return err == nil && len(v) > 0 && number(v[0]) >= 4
	})
	drive(t, srv.URL)
	// Wait until a scrape has seen the whole second round (its loops and
	// then its MCP tool call come last), so that every rate over the last
	// minute covers new activity.
	testwait.Poll(t, 250*time.Millisecond, 60*time.Second, "the second round to be scraped", func() bool {
		v, err := query(api, `sum(sampled_loops_total)`)
		if err != nil || len(v) == 0 || number(v[0]) < 4 {
			return false
		}
		// The MCP tool call comes after the loops.
		v, err = query(api, `sum(sampled_mcp_tool_calls_total)`)
		return err == nil && len(v) > 0 && number(v[0]) >= 2
	})

	for _, e := range dashboardExprs(t) {
		t.Run("panel/"+e.title, func(t *testing.T) {
			checkSeries(t, api, e.expr, false)
		})
	}
	for _, e := range alertExprs(t) {
		t.Run("alert/"+e.title, func(t *testing.T) {
			checkSeries(t, api, withoutComparison(e.expr), false)
		})
	}
	t.Run("series created at start", func(t *testing.T) {
		for q, idle := range startSeries {
			for s := range seriesSet(t, api, q) {
				if !idle[s] {
					t.Errorf("%s: the load created %s", q, s)
				}
			}
		}
	})
	// A provider without failed calls shows a ratio of 0, not "No data":
	// offline (called, its error series at 0), idle (never called: 0/0)
	// and lazy (called, no error series at all); the flaky fake and the
	// provider that is down show their ratios.
	t.Run("upstream error ratio of a healthy provider", func(t *testing.T) {
		var expr string
		for _, e := range dashboardExprs(t) {
			if strings.HasPrefix(e.title, "Upstream error ratio/") {
				expr = e.expr
			}
		}
		if expr == "" {
			t.Fatal("no panel Upstream error ratio")
		}
		v, err := query(api, expr)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, s := range v {
			got[s.Metric["provider"]] = number(s)
		}
		for _, p := range []string{"offline", "idle", "lazy"} {
			if r, ok := got[p]; !ok || r != 0 {
				t.Errorf("%s: ratio %v (present %v), want 0; all: %v", p, r, ok, got)
			}
		}
		if r := got["openai"]; r <= 0 || r >= 1 {
			t.Errorf("openai (every third call fails): ratio %v, want between 0 and 1; all: %v", r, got)
		}
		if r := got["down"]; r != 1 {
			t.Errorf("down: ratio %v, want 1; all: %v", r, got)
		}
	})
	// Prometheus loaded and evaluated every rule without errors.
	testwait.Poll(t, 250*time.Millisecond, 30*time.Second, "rules evaluated", func() bool {
		ok, _ := rulesHealthy(api)
		return ok
	})
}

// drive runs every sampling mode, the guaranteed helpers on the fault
// models, upstream calls through the flaky fake and a tool loop followed
// over SSE.
func drive(t *testing.T, base string) {
	t.Helper()
	tool := `{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	schema := `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
	reqs := []struct{ path, body string }{
		{"/v1/sample", `{"prompt":"hello","model":"offline/default"}`},
		{"/v1/sample", `{"prompt":"hello, streamed","model":"offline/default","stream":true}`},
		{"/v1/sample", `{"prompt":"a person","model":"offline/default","schema":` + schema + `}`},
		{"/v1/sample", `{"prompt":"weather","model":"offline/default","tools":[` + tool + `]}`},
		{"/v1/sample/schema", `{"prompt":"a person","model":"offline/flaky","schema":` + schema + `}`},
		{"/v1/sample/schema", `{"prompt":"a person","model":"offline/broken","schema":` + schema + `}`},
		{"/v1/sample/tools", `{"prompt":"weather","model":"offline/flaky","tools":[` + tool + `]}`},
		{"/v1/sample/tools", `{"prompt":"weather","model":"offline/broken","tools":[` + tool + `]}`},
		{"/v1/messages", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}`},
		{"/v1/sample", `{"prompt":"hi","model":"openai/gpt-4o-mini"}`},
		{"/v1/sample", `{"prompt":"hi","model":"openai/gpt-4o-mini"}`},
		{"/v1/sample", `{"prompt":"hi","model":"openai/gpt-4o-mini"}`},
		{"/v1/sample", `{"prompt":"hi","maxTokens":0}`},
		{"/v1/sample", `{"prompt":"hi","model":"down/gone"}`},
	}
	for _, r := range reqs {
		req, _ := http.NewRequest(http.MethodPost, base+r.path, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+loadKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A key past its rate (429s), a request without a key and one with a
	// wrong key (401s).
	for i := range 12 {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/models", nil)
		switch i {
		case 0:
		case 1:
			req.Header.Set("Authorization", "Bearer not-a-key")
		default:
			req.Header.Set("Authorization", "Bearer "+tightKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Tool loops with an SSE subscriber, read to their end: one calls a
	// std tool, one a tool that fails.
	for _, prompt := range []string{"Please calculate 2 * (3 + 4)", "Please fail"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/loops", strings.NewReader(`{"prompt":"`+prompt+`","model":"offline/default"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+loadKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		done := false
		for sc.Scan() {
			done = done || sc.Text() == "event: loop.completed"
		}
		resp.Body.Close()
		if !done {
			t.Fatal("the loop stream ended without loop.completed")
		}
	}
	// An agent tool of the MCP server at /mcp.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "deploytest", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{loadKey, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_decide", Arguments: map[string]any{"question": "Ship it?"}}); err != nil {
		t.Fatal(err)
	}
}

// The keys of the load (apiKeys in the test's configuration): loadKey's
// rate is high enough for the load, tightKey's is 1 a minute.
const (
	loadKey  = "load-key"
	tightKey = "tight-key"
)

type namedExpr struct{ title, expr string }

// dashboardExprs returns every panel target of the dashboard, with the
// template variables replaced.
func dashboardExprs(t *testing.T) []namedExpr {
	t.Helper()
	b, err := os.ReadFile("../../deploy/grafana/dashboards/sampled.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "5m",
		"${provider}", ".*", "${model}", ".*", "$provider", ".*", "$model", ".*")
	var out []namedExpr
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, namedExpr{fmt.Sprintf("%s/%d", p.Title, i), r.Replace(tg.Expr)})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		t.Fatal("no panel expressions")
	}
	return out
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func alertExprs(t *testing.T) []namedExpr {
	t.Helper()
	b, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var out []namedExpr
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, namedExpr{r.Alert, r.Expr})
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no alerts")
	}
	return out
}

// withoutComparison drops the last top-level comparison of an alert
// expression ("ratio > 0.25" → "ratio"), so that the query returns the
// series the alert watches whether or not it fires.
func withoutComparison(expr string) string {
	expr = strings.TrimSpace(expr)
	depth, cut := 0, -1
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; c {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case '"':
			for i++; i < len(expr) && expr[i] != '"'; i++ {
			}
		case '>', '<', '=', '!':
			if depth == 0 && (c != '=' || i+1 < len(expr) && expr[i+1] == '=') && (c != '!' || i+1 < len(expr) && expr[i+1] == '=') {
				cut = i
				if i+1 < len(expr) && expr[i+1] == '=' {
					i++
				}
			}
		}
	}
	if cut < 0 {
		return expr
	}
	return strings.TrimSpace(expr[:cut])
}

type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func query(api, q string) ([]sample, error) {
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, r.Error)
	}
	return r.Data.Result, nil
}

func number(s sample) float64 {
	str, _ := s.Value[1].(string)
	f, _ := strconv.ParseFloat(str, 64)
	return f
}

// checkSeries requires q to return at least one series that is not NaN.
// On an idle service, a quantile or a mean of a histogram may be NaN: it
// has no value without observations, and its series still give the panel
// its legend.
func checkSeries(t *testing.T, api, q string, idle bool) {
	t.Helper()
	v, err := query(api, q)
	if err != nil {
		t.Fatal(err)
	}
	statistic := idle && (strings.Contains(q, "histogram_quantile(") || strings.Contains(q, "_sum["))
	for _, s := range v {
		if statistic || s.Value[1] != "NaN" {
			return
		}
	}
	t.Errorf("%s returned no series (%d NaN; idle %v)", q, len(v), idle)
}

// seriesSet returns the label sets of the series q returns.
func seriesSet(t *testing.T, api, q string) map[string]bool {
	t.Helper()
	v, err := query(api, q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range v {
		out[fmt.Sprint(s.Metric)] = true
	}
	return out
}

func rulesHealthy(api string) (bool, error) {
	resp, err := http.Get(api + "/api/v1/rules")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return false, err
	}
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			if rule.Health != "ok" {
				return false, fmt.Errorf("rule health %s: %s", rule.Health, rule.LastError)
			}
			n++
		}
	}
	return n > 0, nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// bearer is a RoundTripper that sends an API key with every request.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}
