package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// The keys of the service that needs them.
const (
	aliceKey = "alice-key-0123456789abcdef"
	bobKey   = "bob-key-0123456789abcdef"
)

// service is sampled as it runs, in-process with its offline provider,
// behind a wrapper that records the Last-Event-ID of loop event streams
// and can drop them mid-stream.
type service struct {
	url string

	mu      sync.Mutex
	streams map[*http.Request]context.CancelFunc
	resumed []string // the Last-Event-ID of each event stream request that had one
}

func startService(t *testing.T, cfg *config.Config) *service {
	t.Helper()
	a, err := app.New(context.Background(), app.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	s := &service{streams: map[*http.Request]context.CancelFunc{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/events") {
			a.Handler.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		s.mu.Lock()
		s.streams[r] = cancel
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			s.resumed = append(s.resumed, id)
		}
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.streams, r)
			s.mu.Unlock()
			cancel()
		}()
		a.Handler.ServeHTTP(w, r.WithContext(ctx))
		if ctx.Err() != nil && r.Context().Err() == nil {
			// Dropped: end the connection without ending the response,
			// as a network failure would.
			panic(http.ErrAbortHandler)
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = a.Close()
	})
	s.url = srv.URL
	return s
}

// drop breaks every loop event stream open now; it reports how many.
func (s *service) drop() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.streams {
		cancel()
	}
	return len(s.streams)
}

func (s *service) lastEventIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.resumed)
}

// call sends a request to the service with key (none when empty) and
// decodes its JSON answer into out (when not nil).
func (s *service) call(t *testing.T, method, path, key, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// eventIDs reads a finished run's whole event stream and returns the ids
// of its events other than model.delta, in order.
func (s *service) eventIDs(t *testing.T, id, key string) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.url+"/v1/loops/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ids []string
	var evID, name string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			evID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case line == "":
			if evID != "" && name != "model.delta" {
				ids = append(ids, evID)
			}
			evID, name = "", ""
		}
	}
	return ids
}

// browserPath finds Chromium; without it the test is skipped, or fails
// when CI=true.
func browserPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on PATH: install Debian's chromium package (apt-get install chromium)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
	return ""
}

// tab is one browser tab and what it reported: console errors,
// exceptions, failed requests and error answers.
type tab struct {
	ctx context.Context
	t   *testing.T

	loads    int // pages opened
	mu       sync.Mutex
	urls     map[network.RequestID]string
	problems []string
}

func (b *tab) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.urls[ev.RequestID] = ev.Request.URL
	case *network.EventResponseReceived:
		if ev.Response.Status >= 400 {
			b.problems = append(b.problems, fmt.Sprintf("answer %d %s", ev.Response.Status, ev.Response.URL))
		}
	case *network.EventLoadingFailed:
		if !ev.Canceled { // a page that moves on aborts its streams
			b.problems = append(b.problems, fmt.Sprintf("request failed: %s %s", ev.ErrorText, b.urls[ev.RequestID]))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		b.problems = append(b.problems, "exception: "+text)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, a.Description+string(a.Value))
			}
			b.problems = append(b.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(parts, " ")))
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			b.problems = append(b.problems, fmt.Sprintf("browser log %s: %s %s", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
		}
	}
}

// check fails the test for each problem the tab reported that allowed
// (nil allows none) does not accept.
func (b *tab) check(allowed func(string) bool) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		if allowed == nil || !allowed(p) {
			b.t.Errorf("browser: %s", p)
		}
	}
}

// newTab opens a tab of the shared browser for t, closed with the test,
// whose actions end after limit.
func newTab(t *testing.T, browser context.Context, limit time.Duration) *tab {
	b := &tab{t: t, urls: map[network.RequestID]string{}}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithListener(b.listen))
	t.Cleanup(cancel)
	ctx, cancelTime := context.WithTimeout(ctx, limit)
	t.Cleanup(cancelTime)
	b.ctx = ctx
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 860)); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v (at %s)", err, b.where())
	}
}

// where is the page's address and state, for a failure's message.
func (b *tab) where() string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + ' ready=' + document.body?.dataset.ready`))
	if err != nil {
		return "?"
	}
	return s
}

// eval evaluates a JavaScript expression in the page (as DevTools does,
// so the page's Content-Security-Policy, which forbids eval, does not
// apply).
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits, up to limit, for a JavaScript expression to be true,
// checking every 50 ms.
func (b *tab) until(what, expr string, limit time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("Boolean("+expr+")")); err == nil && ok {
			return
		} else if err != nil && b.ctx.Err() != nil {
			b.t.Fatalf("waiting for %s: %v", what, err)
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waited %v for %s (%s)", limit, what, expr)
		}
		select {
		case <-tick.C:
		case <-b.ctx.Done():
			b.t.Fatalf("waiting for %s: %v", what, b.ctx.Err())
		}
	}
}

// open loads a console page and waits until it shows its data.
func (b *tab) open(base, fragment, ready string) {
	b.t.Helper()
	// A fresh load each time: a new query, as a fragment alone would not
	// reload the page.
	b.loads++
	b.do(chromedp.Navigate(fmt.Sprintf("%s/console?load=%d#%s", base, b.loads, fragment)),
		chromedp.WaitReady(chromedp.CSS(`body[data-ready="`+ready+`"]`)))
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// screenshot saves the page as name in $SAMPLED_SCREENSHOTS, when set; a
// relative directory is taken from the module's root.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("SAMPLED_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(moduleRoot(b.t), dir)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// runsPage is a page of GET /v1/loops.
type runsPage struct {
	Loops []struct{ ID string }
	Next  string
}

func (p runsPage) ids() []string {
	var out []string
	for _, l := range p.Loops {
		out = append(out, l.ID)
	}
	return out
}

// keysConfig is a configuration with two API keys.
func keysConfig(t *testing.T) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sampled.yaml")
	yaml := "apiKeys:\n  - name: alice\n    keyEnv: ALICE_KEY\n  - name: bob\n    keyEnv: BOB_KEY\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SAMPLED_CONFIG": path, "ALICE_KEY": aliceKey, "BOB_KEY": bobKey}
	cfg, err := config.Load(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBrowser drives the console in headless Chromium against the
// service, one tab per case, one browser for all.
func TestBrowser(t *testing.T) {
	exe := browserPath(t)
	open := startService(t, nil)
	keyed := startService(t, keysConfig(t))

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1280, 860))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses to run as root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	startCtx, cancelStart := context.WithTimeout(browser, 20*time.Second)
	defer cancelStart()
	if err := chromedp.Do(startCtx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}

	t.Run("every page loads cleanly", func(t *testing.T) {
		// A finished run to replay.
		var created struct{ ID string }
		if code := open.call(t, "POST", "/v1/loops", "", `{"prompt":"Please calculate 2 * (3 + 4)","model":"offline/default"}`, &created); code != 201 {
			t.Fatalf("start a loop: %d", code)
		}
		b := newTab(t, browser, 20*time.Second)
		b.open(open.url, "/playground", "playground")
		if n := eval[int](b, `document.querySelectorAll('#pg-model option').length`); n < 4 {
			t.Errorf("%d models offered; want those of GET /v1/models", n)
		}
		b.open(open.url, "/tools", "tools")
		if !eval[bool](b, `!!document.querySelector('[data-server="std"]') && !!document.querySelector('[data-tool="std__calculate"]')`) {
			t.Error("the tools page does not show the std server and its tools")
		}
		b.open(open.url, "/loops", "loops")
		b.until("the runs list", `document.querySelector('#lp-runs tr[data-run="`+created.ID+`"]')`, 5*time.Second)
		// Opening a finished run replays it from its log.
		b.do(chromedp.Click(chromedp.CSS(`#lp-runs tr[data-run="` + created.ID + `"] a`)))
		b.do(chromedp.WaitReady(chromedp.CSS(`body[data-ready="loops"] #timeline`)))
		b.until("the replayed run", `document.querySelector('#loop-conn').dataset.state === 'ended'`, 10*time.Second)
		got := eval[[]string](b, `[...document.querySelectorAll('#timeline [data-event-id]')].map(e => e.dataset.eventId)`)
		if want := open.eventIDs(t, created.ID, ""); !slices.Equal(got, want) {
			t.Errorf("replayed rows %v; want the run's events %v", got, want)
		}
		if s := eval[string](b, `document.querySelector('#loop-status').dataset.status`); s != "completed" {
			t.Errorf("status %q, want completed", s)
		}
		b.open(open.url, "/nowhere", "none")
		b.check(nil)

		// The console's own answers carry the policy.
		resp, err := http.Get(open.url + "/console")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("Content-Security-Policy %q", csp)
		}
	})

	t.Run("a guaranteed retry shows both attempts", func(t *testing.T) {
		b := newTab(t, browser, 20*time.Second)
		b.open(open.url, "/playground", "playground")
		b.do(chromedp.Click(chromedp.CSS(`.presets button:nth-of-type(1)`)), chromedp.Click(chromedp.CSS(`#pg-run`)))
		b.until("the answer", `document.querySelector('#pg-output').dataset.state === 'done'`, 15*time.Second)
		outcomes := eval[[]string](b, `[...document.querySelectorAll('#pg-attempts .attempt')].map(a => a.dataset.outcome)`)
		if !slices.Equal(outcomes, []string{"failed", "passed"}) {
			t.Fatalf("attempts %v; want one failed, then one passed", outcomes)
		}
		paths := eval[[]string](b, `[...document.querySelectorAll('.attempt[data-outcome="failed"] .errors tbody tr')].map(r => r.cells[0].textContent)`)
		if len(paths) == 0 {
			t.Error("the failed attempt shows no errors")
		}
		fix := eval[string](b, `document.querySelector('.attempt[data-outcome="failed"] .correction pre')?.textContent ?? ''`)
		for _, p := range paths {
			if p == "(root)" {
				p = ""
			}
			if !strings.Contains(fix, p+": ") {
				t.Errorf("corrective turn %q does not name the error at %q", fix, p)
			}
		}
		failed := eval[string](b, `document.querySelector('.attempt[data-outcome="failed"] pre.answer').textContent`)
		if failed == "" || json.Valid([]byte(failed)) {
			t.Errorf("failed attempt's answer %q; want the broken JSON it streamed", failed)
		}
		if !eval[bool](b, `!!document.querySelector('#pg-parsed .json')`) {
			t.Error("no parsed value shown")
		}
		facts := eval[string](b, `document.querySelector('#pg-facts').textContent`)
		for _, want := range []string{"Attempts2", "Cost", "Tokens"} {
			if !strings.Contains(facts, want) {
				t.Errorf("result facts %q lack %q", facts, want)
			}
		}
		// Copy as: every form of the request names the route or its model.
		for _, c := range []struct{ kind, want string }{
			{"go", "client.RouteSampleSchema"}, {"openai", `"offline/flaky"`}, {"curl", "/v1/sample/schema"},
		} {
			b.do(chromedp.Click(chromedp.CSS(`button[data-kind="` + c.kind + `"]`)))
			if s := eval[string](b, `document.querySelector('#pg-snippet').textContent`); !strings.Contains(s, c.want) {
				t.Errorf("copy as %s: %q lacks %q", c.kind, s, c.want)
			}
		}
		b.screenshot("playground.png")
		b.check(nil)
	})

	t.Run("a streamed answer grows before it completes", func(t *testing.T) {
		b := newTab(t, browser, 20*time.Second)
		b.open(open.url, "/playground", "playground")
		b.do(chromedp.Click(chromedp.CSS(`.presets button:nth-of-type(2)`)), chromedp.Click(chromedp.CSS(`#pg-run`)))
		partial := `document.querySelector('#pg-output').dataset.state === 'running' && (document.querySelector('#pg-attempts pre.answer')?.textContent.length ?? 0) > 0`
		b.until("a partial answer", partial, 10*time.Second)
		first := eval[string](b, `document.querySelector('#pg-attempts pre.answer').textContent`)
		if !eval[bool](b, `document.querySelector('#pg-status .busy .spin') !== null && /^[0-9.,]*[1-9][0-9.,]* s$/.test(document.querySelector('#pg-status .elapsed').textContent)`) {
			t.Error("no spinner with the elapsed time while the answer streams")
		}
		b.until("the whole answer", `document.querySelector('#pg-output').dataset.state === 'done'`, 15*time.Second)
		final := eval[string](b, `document.querySelector('#pg-attempts pre.answer').textContent`)
		if len(final) <= len(first) || !strings.HasPrefix(final, first) {
			t.Errorf("answer %q while streaming, %q at the end; want it to grow", first, final)
		}
		b.check(nil)
	})

	t.Run("a slow loop shows its iterations live and cancels", func(t *testing.T) {
		b := newTab(t, browser, 25*time.Second)
		b.open(open.url, "/loops", "loops")
		if m := eval[string](b, `document.querySelector('#lp-model').value`); m != "offline/slow" {
			t.Fatalf("model %q preselected; want offline/slow", m)
		}
		b.do(chromedp.Click(chromedp.CSS(`#lp-start`)))
		b.do(chromedp.WaitReady(chromedp.CSS(`body[data-ready="loops"] #timeline`)))
		// Iteration 1 ends while the run still runs: its rows came live.
		b.until("iteration 1", `document.querySelector('#timeline [data-event="iteration.completed"]')`, 10*time.Second)
		if s := eval[string](b, `document.querySelector('#loop-status').dataset.status`); s != "running" {
			t.Fatalf("status %q when iteration 1 ended; want running", s)
		}
		for _, ev := range []string{"loop.started", "model.completed", "tool.started", "tool.completed"} {
			if !eval[bool](b, `!!document.querySelector('#timeline [data-event="`+ev+`"]')`) {
				t.Errorf("no %s row", ev)
			}
		}
		if !eval[bool](b, `/Iterations: 1 \//.test(document.querySelector('#loop-progress').textContent) && !!document.querySelector('.run-head .spin')`) {
			t.Errorf("progress %q; want 1 iteration and a spinner", eval[string](b, `document.querySelector('#loop-progress').textContent`))
		}
		b.screenshot("loop.png")
		b.do(chromedp.Click(chromedp.CSS(`#loop-cancel`)))
		b.until("the cancelled run", `document.querySelector('#loop-status').dataset.status !== 'running'`, 10*time.Second)
		if s := eval[string](b, `document.querySelector('#loop-status').dataset.status`); s != "cancelled" {
			t.Errorf("status %q; want cancelled", s)
		}
		id := eval[string](b, `location.hash.split('/')[2]`)
		var run struct{ Status string }
		open.call(t, "GET", "/v1/loops/"+id, "", "", &run)
		if run.Status != "cancelled" {
			t.Errorf("the service says %q; want cancelled", run.Status)
		}
		b.check(nil)
	})

	t.Run("a tool's nested sampling shows in the timeline", func(t *testing.T) {
		// A tool on an MCP server that asks sampled to sample while the
		// loop calls it.
		path := filepath.Join(t.TempDir(), "sampled.yaml")
		if err := os.WriteFile(path, []byte("mcpServers:\n  adviser: {url: "+mcptest.Adviser(t)+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(func(k string) string { return map[string]string{"SAMPLED_CONFIG": path}[k] }, nil)
		if err != nil {
			t.Fatal(err)
		}
		svc := startService(t, cfg)
		testwait.Poll(t, 20*time.Millisecond, 10*time.Second, "the adviser's tool", func() bool {
			var tools struct{ Tools []struct{ Name string } }
			svc.call(t, "GET", "/v1/tools", "", "", &tools)
			return slices.ContainsFunc(tools.Tools, func(x struct{ Name string }) bool { return x.Name == "adviser__consult" })
		})
		var created struct{ ID string }
		body := `{"prompt":"Consult the adviser on the question: is it wise?","allowedTools":["adviser__*"],"toolChoice":{"mode":"required"},"maxIterations":3}`
		if code := svc.call(t, "POST", "/v1/loops", "", body, &created); code != 201 {
			t.Fatalf("start a loop: %d", code)
		}
		b := newTab(t, browser, 20*time.Second)
		b.open(svc.url, "/loops/"+created.ID, "loops")
		b.until("the finished run", `document.querySelector('#loop-conn').dataset.state === 'ended'`, 10*time.Second)
		row := `document.querySelector('#timeline [data-event="tool.sampling"]')`
		if !eval[bool](b, `!!`+row) {
			t.Fatal("no tool.sampling row")
		}
		if text := eval[string](b, row+`.textContent`); !strings.Contains(text, "Nested sampling for adviser__consult") || !strings.Contains(text, "offline/default") {
			t.Errorf("the nested sampling row says %q", text)
		}
		b.check(nil)
	})

	t.Run("a dropped stream resumes without duplicates", func(t *testing.T) {
		b := newTab(t, browser, 25*time.Second)
		var created struct{ ID string }
		if code := open.call(t, "POST", "/v1/loops", "", `{"prompt":"Please calculate 2 * (3 + 4)","model":"offline/slow","streamDeltas":true}`, &created); code != 201 {
			t.Fatalf("start a loop: %d", code)
		}
		b.open(open.url, "/loops/"+created.ID, "loops")
		b.until("the first model turn", `document.querySelector('#timeline [data-event="model.completed"]')`, 10*time.Second)
		if n := open.drop(); n == 0 {
			t.Fatal("no event stream to drop")
		}
		b.until("the end of the run", `document.querySelector('#loop-conn').dataset.state === 'ended'`, 15*time.Second)
		if c, _ := strconv.Atoi(eval[string](b, `document.querySelector('#loop-conn').dataset.connections`)); c < 2 {
			t.Errorf("%d connections; want a resumed one", c)
		}
		resumed := open.lastEventIDs()
		if len(resumed) == 0 {
			t.Fatal("no request resumed with Last-Event-ID")
		}
		if n, err := strconv.Atoi(resumed[len(resumed)-1]); err != nil || n < 1 {
			t.Errorf("Last-Event-ID %q", resumed[len(resumed)-1])
		}
		got := eval[[]string](b, `[...document.querySelectorAll('#timeline [data-event-id]')].map(e => e.dataset.eventId)`)
		if want := open.eventIDs(t, created.ID, ""); !slices.Equal(got, want) {
			t.Errorf("rows %v; want each event once, in order: %v", got, want)
		}
		if s := eval[string](b, `document.querySelector('#loop-status').dataset.status`); s != "completed" {
			t.Errorf("status %q; want completed", s)
		}
		// The dropped stream is a failed request, and only it.
		b.check(func(p string) bool {
			return strings.HasSuffix(p, "ERR_INCOMPLETE_CHUNKED_ENCODING "+open.url+"/v1/loops/"+created.ID+"/events")
		})
	})

	t.Run("a narrow window, by keyboard", func(t *testing.T) {
		b := newTab(t, browser, 20*time.Second)
		b.do(chromedp.EmulateViewport(390, 800))
		for _, p := range []string{"playground", "loops", "tools"} {
			b.open(open.url, "/"+p, p)
			if w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
				t.Errorf("%s: %d px wide in a %d px window", p, w[0], w[1])
			}
		}
		// The nav links, the presets and the form work from the keyboard:
		// Enter follows a link and presses a button, Ctrl+Enter runs.
		b.do(chromedp.Focus(chromedp.CSS(`a[data-nav="playground"]`)), chromedp.KeyEvent(kb.Enter),
			chromedp.WaitReady(chromedp.CSS(`body[data-ready="playground"]`)),
			chromedp.Focus(chromedp.CSS(`.presets button:nth-of-type(1)`)), chromedp.KeyEvent(kb.Enter),
			chromedp.Focus(chromedp.CSS(`#pg-prompt`)), chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		b.until("the answer", `document.querySelector('#pg-output').dataset.state === 'done'`, 15*time.Second)
		if n := eval[int](b, `document.querySelectorAll('#pg-attempts .attempt').length`); n != 2 {
			t.Errorf("%d attempts; want the preset's retry", n)
		}
		if p := eval[string](b, `document.querySelector('#pg-prompt').value`); p != "A person" {
			t.Errorf("prompt %q: Ctrl+Enter typed into it", p)
		}
		b.check(nil)
	})

	t.Run("the runs list pages as the API does", func(t *testing.T) {
		for i := range 21 {
			req, err := http.NewRequestWithContext(t.Context(), "POST", open.url+"/v1/loops",
				strings.NewReader(fmt.Sprintf(`{"prompt":"Please calculate %d + 1","model":"offline/default"}`, i)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream") // the answer ends with the run
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		var first, second runsPage
		open.call(t, "GET", "/v1/loops?limit=20", "", "", &first)
		open.call(t, "GET", "/v1/loops?limit=20&cursor="+first.Next, "", "", &second)
		if len(first.Loops) != 20 || len(second.Loops) == 0 {
			t.Fatalf("pages of %d and %d runs; want 20 and more", len(first.Loops), len(second.Loops))
		}
		rows := `[...document.querySelectorAll('#lp-runs tr[data-run]')].map(r => r.dataset.run)`
		b := newTab(t, browser, 20*time.Second)
		b.open(open.url, "/loops", "loops")
		if got := eval[[]string](b, rows); !slices.Equal(got, first.ids()) {
			t.Errorf("page 1 %v; want %v", got, first.ids())
		}
		b.do(chromedp.Click(chromedp.CSS(`#lp-older`)))
		b.until("page 2", `document.querySelector('#lp-runs tr[data-run="`+second.Loops[0].ID+`"]')`, 5*time.Second)
		if got := eval[[]string](b, rows); !slices.Equal(got, second.ids()) {
			t.Errorf("page 2 %v; want %v", got, second.ids())
		}
		b.do(chromedp.Click(chromedp.CSS(`#lp-newer`)))
		b.until("page 1 again", `document.querySelector('#lp-runs tr[data-run="`+first.Loops[0].ID+`"]')`, 5*time.Second)
		b.check(nil)
	})

	t.Run("times in the viewer's locale and zone", func(t *testing.T) {
		var created struct{ ID string }
		if code := open.call(t, "POST", "/v1/loops", "", `{"prompt":"Please calculate 5 * 5","model":"offline/default"}`, &created); code != 201 {
			t.Fatalf("start a loop: %d", code)
		}
		var run struct{ CreatedAt time.Time }
		open.call(t, "GET", "/v1/loops/"+created.ID, "", "", &run)
		b := newTab(t, browser, 20*time.Second)
		b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "de_DE"}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"})
			return err
		}))
		b.open(open.url, "/loops/"+created.ID, "loops")
		tokyo := run.CreatedAt.In(time.FixedZone("JST", 9*3600))
		want := tokyo.Format("02.01.2006, 15:04:05")
		if got := eval[string](b, `document.querySelector('.run-head time').textContent`); got != want {
			t.Errorf("started %q; want %q, German style in Tokyo time", got, want)
		}
		b.check(nil)
	})

	t.Run("a problem shows its detail and errors by path", func(t *testing.T) {
		b := newTab(t, browser, 20*time.Second)
		b.open(open.url, "/playground", "playground")
		b.do(chromedp.Click(chromedp.CSS(`.presets button:nth-of-type(1)`)))
		// The schema editor checks as one types, and a broken schema
		// cannot be sent.
		eval[bool](b, `(document.querySelector('#pg-schema').value = '', true)`)
		b.do(chromedp.SendKeys(chromedp.CSS(`#pg-schema`), `{"type":`))
		b.until("the editor's complaint", `/Not JSON/.test(document.querySelector('#pg-schema-check').textContent) && document.querySelector('#pg-run').disabled`, 5*time.Second)
		b.do(chromedp.SendKeys(chromedp.CSS(`#pg-schema`), `"object","required":["name"]}`))
		b.until("the editor's approval", `!document.querySelector('#pg-run').disabled`, 5*time.Second)
		// offline/broken never answers validly: with no retry, the answer
		// is the 422 problem, its detail and its errors by path.
		b.do(chromedp.SetValue(chromedp.CSS(`#pg-model`), "offline/broken"), chromedp.SetValue(chromedp.CSS(`#pg-retries`), "0"),
			chromedp.Click(chromedp.CSS(`#pg-run`)))
		b.until("the answer", `document.querySelector('#pg-output').dataset.state === 'done'`, 15*time.Second)
		title := eval[string](b, `document.querySelector('#pg-result .problem .problem-title')?.textContent ?? ''`)
		detail := eval[string](b, `document.querySelector('#pg-result .problem .problem-detail')?.textContent ?? ''`)
		paths := eval[[]string](b, `[...document.querySelectorAll('#pg-result .problem .errors tbody tr')].map(r => r.cells[0].textContent)`)
		if !strings.HasPrefix(title, "422") || detail == "" || len(paths) == 0 {
			t.Errorf("problem %q, detail %q, error paths %v; want the 422, its detail and its errors", title, detail, paths)
		}
		b.check(nil)
	})

	t.Run("keys: the console asks for one and refuses a wrong one", func(t *testing.T) {
		var alices, bobs struct{ ID string }
		keyed.call(t, "POST", "/v1/loops", aliceKey, `{"prompt":"Please calculate 1 + 1"}`, &alices)
		keyed.call(t, "POST", "/v1/loops", bobKey, `{"prompt":"Please calculate 2 + 2"}`, &bobs)
		if alices.ID == "" || bobs.ID == "" {
			t.Fatal("no loops started")
		}
		b := newTab(t, browser, 20*time.Second)
		b.do(chromedp.Navigate(keyed.url+"/console#/loops"), chromedp.WaitVisible(chromedp.CSS(`#key-dialog[open] #key-input`)))
		if eval[bool](b, `!document.querySelector('#key-error').hidden`) {
			t.Error("the first prompt says a key was refused")
		}
		b.do(chromedp.SendKeys(chromedp.CSS(`#key-input`), "not-a-key"), chromedp.Click(chromedp.CSS(`#key-submit`)))
		b.until("the refusal", `document.querySelector('#key-dialog').open && !document.querySelector('#key-error').hidden`, 5*time.Second)
		if msg := eval[string](b, `document.querySelector('#key-error').textContent`); !strings.Contains(msg, "refused") {
			t.Errorf("refusal %q", msg)
		}
		b.do(chromedp.SendKeys(chromedp.CSS(`#key-input`), aliceKey), chromedp.Click(chromedp.CSS(`#key-submit`)))
		b.do(chromedp.WaitReady(chromedp.CSS(`body[data-ready="loops"]`)))
		b.until("alice's run", `document.querySelector('#lp-runs tr[data-run="`+alices.ID+`"]')`, 5*time.Second)
		if eval[bool](b, `!!document.querySelector('#lp-runs tr[data-run="`+bobs.ID+`"]')`) {
			t.Error("the runs list shows another key's run")
		}
		if k := eval[string](b, `sessionStorage.getItem('sampled.apiKey')`); k != aliceKey {
			t.Errorf("session storage holds %q", k)
		}
		// Another key's run is not found, as in the API.
		b.open(keyed.url, "/loops/"+bobs.ID, "loops-error")
		if !eval[bool](b, `/404/.test(document.querySelector('.problem').textContent)`) {
			t.Error("another key's run is not answered as not found")
		}
		b.check(func(p string) bool {
			return strings.Contains(p, "401") || (strings.Contains(p, "404") && strings.Contains(p, bobs.ID))
		})
	})
}
