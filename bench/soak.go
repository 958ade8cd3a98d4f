package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sse "github.com/tmaxmax/go-sse"
)

// The soak runs mixed traffic at a fixed rate against the built sampled,
// a child process configured by a file, in front of a fake OpenAI upstream
// that injects faults, and watches the process for growth.

// soakOptions configure a soak.
type soakOptions struct {
	d    time.Duration // how long the traffic runs
	rate float64       // operations started per second
}

// interval is the time between two printed samples: a minute, or a 30th
// of a shorter run (at least a second).
func (o soakOptions) interval() time.Duration {
	return min(time.Minute, max(time.Second, o.d/30))
}

// warm is the warm-up that growth is measured after: the first 5 minutes,
// or the first third of a run shorter than 15 minutes.
func (o soakOptions) warm() time.Duration {
	if o.d < 15*time.Minute {
		return o.d / 3
	}
	return 5 * time.Minute
}

// Faults of the soak's upstream, as fractions of the first tries of
// distinct request bodies (a retry, the same body again, is answered): a
// 429 asking for a second's wait, a 500, a hang until sampled's call
// timeout (soakCallTimeout), a body trickled over slowAnswer. Others are
// answered after upstreamDelay.
const (
	fault429        = 0.02
	fault500        = 0.02
	faultHang       = 0.005
	faultSlow       = 0.03
	upstreamDelay   = 20 * time.Millisecond
	slowAnswer      = 300 * time.Millisecond
	soakCallTimeout = 2 * time.Second
	soakStoreBytes  = 4 << 20
)

// soakSample is one printed line: the process's floors over the interval
// (the least of its probes: a leak raises the floor, requests in flight
// only the peaks) and the latency of the request-response operations that
// ended in it.
type soakSample struct {
	at         time.Duration
	rss        int64 // bytes
	goroutines int
	fds        int
	p50, p99   time.Duration
	cpu        float64 // cores used by sampled and the bench
}

// soakReport is what a soak saw.
type soakReport struct {
	samples []soakSample
	ops     int      // operations ended
	lost    int      // requests without an answer, or with a wrong one
	broken  int      // streams that missed or repeated an event, or never ended
	errs    []string // the first few failures
}

// problems lists what fails the soak: lost requests, broken streams, and
// each measure that grew after warm: whose median over the last quarter of
// the samples after warm (at least three) exceeds both its median over
// their first quarter by more than 10 % and the highest sample of that
// first quarter. Medians, and the first quarter's own range, because a
// sample is noisy on a shared machine: Go's heap grows and shrinks in
// cycles of about a minute, and a busy moment holds more requests (in a
// 3-minute soak the goroutines' floor moved between 152 and 183 from one
// sample to the next, with nothing growing). A leak leaves that range.
func (r *soakReport) problems(warm time.Duration) []string {
	var out []string
	if r.lost > 0 {
		out = append(out, fmt.Sprintf("%d of %d operations lost", r.lost, r.ops))
	}
	if r.broken > 0 {
		out = append(out, fmt.Sprintf("%d event streams missed or repeated an event", r.broken))
	}
	i := slices.IndexFunc(r.samples, func(s soakSample) bool { return s.at > warm })
	if i < 0 || len(r.samples)-i < 2 {
		return append(out, "too few samples after the warm-up to judge growth")
	}
	after := r.samples[i:]
	w := min(len(after), max(3, len(after)/4))
	for _, m := range []struct {
		name string
		of   func(soakSample) float64
	}{
		{"RSS", func(s soakSample) float64 { return float64(s.rss) }},
		{"goroutines", func(s soakSample) float64 { return float64(s.goroutines) }},
		{"open files", func(s soakSample) float64 { return float64(s.fds) }},
		{"p50", func(s soakSample) float64 { return float64(s.p50) }},
		{"p99", func(s soakSample) float64 { return float64(s.p99) }},
	} {
		first := after[:w]
		base, end := medianOf(first, m.of), medianOf(after[len(after)-w:], m.of)
		if end > 1.1*base && end > maxOf(first, m.of) {
			out = append(out, fmt.Sprintf("%s grew %.0f%% after the warm-up (median of the first %d samples %.4g, of the last %d %.4g)",
				m.name, 100*(end/base-1), w, base, w, end))
		}
	}
	return out
}

func maxOf(s []soakSample, of func(soakSample) float64) float64 {
	m := of(s[0])
	for _, x := range s[1:] {
		m = max(m, of(x))
	}
	return m
}

func medianOf(s []soakSample, of func(soakSample) float64) float64 {
	v := make([]float64, len(s))
	for i, x := range s {
		v[i] = of(x)
	}
	return median(v)
}

// runSoak runs the soak and fails if it saw a problem. The temporary
// directory with the binaries, the configuration and sampled's log is kept
// when it fails.
func runSoak(ctx context.Context, o soakOptions, stdout io.Writer) error {
	dir, err := os.MkdirTemp("", "sampled-soak-")
	if err != nil {
		return err
	}
	rep, err := soak(ctx, o, dir, stdout)
	if err == nil {
		if p := rep.problems(o.warm()); len(p) > 0 {
			err = fmt.Errorf("soak failed:\n  %s", strings.Join(p, "\n  "))
		}
	}
	if err != nil {
		return fmt.Errorf("%w\n(sampled's log and configuration are in %s)", err, dir)
	}
	fmt.Fprintf(stdout, "soak passed: %d operations, none lost, every stream whole, flat after %s\n", rep.ops, o.warm())
	return os.RemoveAll(dir)
}

// soak builds sampled and the sampling peer into dir, runs the traffic
// for o.d and returns what it saw; an error means the soak could not run.
func soak(ctx context.Context, o soakOptions, dir string, stdout io.Writer) (*soakReport, error) {
	sampledBin, peerBin := filepath.Join(dir, "sampled"), filepath.Join(dir, "samplingpeer")
	for bin, pkg := range map[string]string{sampledBin: "cmd/server", peerBin: "internal/tools/testdata/samplingpeer"} {
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sampled/sampled/"+pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	key, upstreamKey := rand.Text(), rand.Text()
	fake := &soakUpstream{key: upstreamKey, seen: map[[32]byte]bool{}}
	upstream, stopUpstream, err := serve(&http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer stopUpstream()

	// JSON is YAML: the configuration is written through encoding/json.
	type obj = map[string]any
	cfg, err := json.Marshal(obj{
		"default":     "fake/gpt-4o-mini",
		"callTimeout": soakCallTimeout.String(),
		"providers": []obj{{"name": "fake", "type": "openai", "endpoint": upstream + "/v1",
			"apiKeyEnv": "SOAK_UPSTREAM_KEY", "models": []obj{{"name": "gpt-4o-mini"}}}},
		"apiKeys": []obj{{"name": "soak", "keyEnv": "SOAK_API_KEY", "requestsPerMinute": 1 << 20, "concurrentLoops": 1 << 10}},
		// Finished runs are kept for an hour unless the store is full: a
		// small store fills within the warm-up and then drops runs as
		// fast as loops add them. The in-flight cap is sized for the
		// moments a busy machine stalls the service.
		"limits": obj{"storeBytes": soakStoreBytes, "inFlightSamples": 4096},
		"mcpServers": obj{"peer": obj{"command": peerBin,
			"sampling": obj{"requestsPerMinute": 1 << 20, "maxTokens": 100}}},
	})
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	srv, err := startSampled(sampledBin, filepath.Join(dir, "sampled.log"), []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SAMPLED_ADDR=127.0.0.1:0", "SAMPLED_CONFIG=" + cfgPath,
		"SOAK_API_KEY=" + key, "SOAK_UPSTREAM_KEY=" + upstreamKey,
	})
	if err != nil {
		return nil, err
	}
	defer srv.stop()

	t := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	s := &soaker{base: srv.base, client: &http.Client{Transport: bearer{key: key, rt: t}}, out: stdout}
	defer t.CloseIdleConnections()
	if err := s.waitForPeer(ctx); err != nil {
		return nil, err
	}
	if s.session, err = s.connectMCP(ctx); err != nil {
		return nil, err
	}
	defer s.session.Close() // a second Close does nothing

	fmt.Fprintf(stdout, "soak: %s of mixed traffic at %.0f operations/s against %s (pid %d), the upstream injecting faults; "+
		"floors of RSS, goroutines and open files, latency of samples and /mcp calls, CPU of sampled and the bench\n",
		o.d, o.rate, srv.base, srv.pid())
	stopLoad, loaded := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loaded)
		s.load(ctx, stopLoad, o.rate)
	}()
	stop := sync.OnceFunc(func() {
		close(stopLoad)
		<-loaded
	})
	defer stop()

	interval := o.interval()
	probe := time.NewTicker(interval / 12)
	defer probe.Stop()
	start, last := time.Now(), time.Now()
	cpu0, err := s.cpu(srv.pid())
	if err != nil {
		return nil, err
	}
	var floor soakSample
	for at := interval; at <= o.d; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-srv.exited:
			return nil, fmt.Errorf("sampled exited during the soak: %v", srv.err)
		case <-probe.C:
		}
		p, err := s.probe(ctx, srv.pid())
		if err != nil {
			return nil, err
		}
		if floor.rss == 0 {
			floor = p
		}
		floor.rss, floor.goroutines, floor.fds = min(floor.rss, p.rss), min(floor.goroutines, p.goroutines), min(floor.fds, p.fds)
		if time.Since(start) < at {
			continue
		}
		floor.at = at
		floor.p50, floor.p99 = s.latencies()
		cpu1, err := s.cpu(srv.pid())
		if err != nil {
			return nil, err
		}
		now := time.Now()
		floor.cpu, cpu0, last = float64(cpu1-cpu0)/float64(now.Sub(last)), cpu1, now
		s.mu.Lock()
		s.rep.samples = append(s.rep.samples, floor)
		fmt.Fprintf(stdout, "%8s  rss %6.1f MB  goroutines %4d  open files %3d  p50 %6.1fms  p99 %7.1fms  cpu %.2f cores  ops %d, lost %d, broken streams %d\n",
			at, float64(floor.rss)/1e6, floor.goroutines, floor.fds, ms(floor.p50), ms(floor.p99), floor.cpu, s.rep.ops, s.rep.lost, s.rep.broken)
		s.mu.Unlock()
		floor = soakSample{}
		at += interval
	}
	// The operations still running end within their timeouts and count.
	stop()
	if err := s.session.Close(); err != nil {
		return nil, fmt.Errorf("mcp: close the session: %w", err)
	}
	if err := srv.stop(); err != nil {
		return nil, fmt.Errorf("sampled did not shut down cleanly: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := s.rep
	return &rep, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// sampledProc is the sampled child process.
type sampledProc struct {
	cmd    *exec.Cmd
	base   string
	exited chan struct{} // closed once it exited; err is then its Wait error
	err    error
	once   sync.Once
}

// startSampled starts bin with env, its log written to logPath, and waits
// for its "listening on ADDR" line.
func startSampled(bin, logPath string, env []string) (*sampledProc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env, cmd.Stderr = env, log
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &sampledProc{cmd: cmd, exited: make(chan struct{})}
	sc := bufio.NewScanner(out)
	line := ""
	if sc.Scan() {
		line = sc.Text()
	}
	go func() {
		_, _ = io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	addr, ok := strings.CutPrefix(line, "listening on ")
	if !ok {
		<-p.exited
		return nil, fmt.Errorf("sampled did not start (%v; said %q); its log is %s", p.err, line, logPath)
	}
	p.base = "http://" + addr
	return p, nil
}

func (p *sampledProc) pid() int { return p.cmd.Process.Pid }

// stop interrupts sampled, which drains and exits, and returns its exit
// error; after 40 s it is killed.
func (p *sampledProc) stop() error {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		t := time.NewTimer(40 * time.Second)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p.err
}

// bearer adds the API key to every request.
type bearer struct {
	key string
	rt  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.rt.RoundTrip(r)
}

// soaker sends the soak's traffic and keeps its account.
type soaker struct {
	base    string
	client  *http.Client
	session *mcp.ClientSession // the long-lived /mcp session

	out      io.Writer    // where failures are printed
	mcpCalls atomic.Int64 // /mcp calls made

	mu  sync.Mutex // guards the fields below
	rep soakReport
	lat []time.Duration // of the timed operations ended since the last sample
}

// soakOp is one kind of operation of the mix; the latency of the timed
// ones is measured.
type soakOp struct {
	name    string
	timed   bool
	timeout time.Duration
	run     func(ctx context.Context, n int) error
}

// mix is the operations in the order they are started, round after round:
// of 20, 6 plain samples, 4 schema and 4 tools samples (half of them
// guaranteed), 4 /mcp calls and 2 loops followed over SSE.
func (s *soaker) mix() []soakOp {
	const timeout = 30 * time.Second
	plain := soakOp{"plain", true, timeout, s.plain}
	schema := soakOp{"schema", true, timeout, s.schema("/v1/sample")}
	schemaG := soakOp{"schema guaranteed", true, timeout, s.schema("/v1/sample/schema")}
	tools := soakOp{"tools", true, timeout, s.tools("/v1/sample")}
	toolsG := soakOp{"tools guaranteed", true, timeout, s.tools("/v1/sample/tools")}
	mcpCall := soakOp{"mcp", true, timeout, s.mcpCall}
	loop := soakOp{"loop", false, time.Minute, s.loop}
	return []soakOp{
		plain, schema, loop, plain, tools, mcpCall, plain, schemaG, mcpCall, plain,
		toolsG, loop, plain, mcpCall, schema, plain, tools, mcpCall, schemaG, toolsG,
	}
}

// load starts one operation of the mix every 1/rate seconds until stop is
// closed, and waits for the running ones to end.
func (s *soaker) load(ctx context.Context, stop <-chan struct{}, rate float64) {
	mix := s.mix()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		op := mix[n%len(mix)]
		wg.Go(func() {
			octx, cancel := context.WithTimeout(ctx, op.timeout)
			defer cancel()
			t0 := time.Now()
			err := op.run(octx, n)
			s.done(op, time.Since(t0), err)
		})
	}
}

// maxReported is the most failures printed as they happen.
const maxReported = 20

// done counts an ended operation.
func (s *soaker) done(op soakOp, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.ops++
	if err == nil {
		if op.timed {
			s.lat = append(s.lat, d)
		}
		return
	}
	var se *streamError
	if errors.As(err, &se) {
		s.rep.broken++
	} else {
		s.rep.lost++
	}
	if len(s.rep.errs) < maxReported {
		s.rep.errs = append(s.rep.errs, op.name+": "+err.Error())
		fmt.Fprintf(s.out, "  FAILED %s after %s: %v\n", op.name, d.Round(time.Millisecond), err)
	}
}

// latencies returns the median and 99th percentile of the timed
// operations that ended since the last call.
func (s *soaker) latencies() (p50, p99 time.Duration) {
	s.mu.Lock()
	l := s.lat
	s.lat = nil
	s.mu.Unlock()
	if len(l) == 0 {
		return 0, 0
	}
	slices.Sort(l)
	return quantile(l, .50), quantile(l, .99)
}

// probe reads sampled's resident memory and open files from /proc and its
// goroutines from /metrics.
func (s *soaker) probe(ctx context.Context, pid int) (soakSample, error) {
	rss, _, err := procMem(pid)
	if err != nil {
		return soakSample{}, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return soakSample{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/metrics", nil)
	if err != nil {
		return soakSample{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return soakSample{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			g, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return soakSample{}, fmt.Errorf("metrics: go_goroutines %q: %w", v, err)
			}
			return soakSample{rss: rss, fds: len(fds), goroutines: int(g)}, nil
		}
	}
	return soakSample{}, fmt.Errorf("metrics: no go_goroutines (status %d, %v)", resp.StatusCode, sc.Err())
}

// cpu is the CPU time used by sampled (pid) and the bench, which holds
// the clients and the upstream.
func (s *soaker) cpu(pid int) (time.Duration, error) {
	a, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	b, err := procCPU(os.Getpid())
	return a + b, err
}

// waitForPeer waits until sampled lists the sampling peer's tool.
func (s *soaker) waitForPeer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var list struct {
			Tools []named `json:"tools"`
		}
		err := s.do(ctx, http.MethodGet, "/v1/tools", nil, http.StatusOK, &list)
		if err == nil && slices.Contains(list.Tools, named{peerTool}) {
			return nil
		}
		if !wait(ctx, 100*time.Millisecond) {
			return fmt.Errorf("sampled lists no %s tool (%v)", peerTool, err)
		}
	}
}

// peerTool is the sampling peer's tool that asks sampled to sample.
const peerTool = "peer__sample"

// wait waits for d, and reports false if ctx ended first.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// do sends a request with body as JSON (nil for none) and decodes the
// answer, which must have status want, into out.
func (s *soaker) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %.300s", method, path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// soakBody is the body of the soak's samples and loops.
type soakBody struct {
	Prompt        string          `json:"prompt"`
	MaxTokens     int             `json:"maxTokens,omitempty"`
	Schema        json.RawMessage `json:"schema,omitempty"`
	Tools         []soakTool      `json:"tools,omitempty"`
	AllowedTools  []string        `json:"allowedTools,omitempty"`
	MaxIterations int             `json:"maxIterations,omitempty"`
}

type soakTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// soakAnswer is what the soak checks of a sample's answer.
type soakAnswer struct {
	Text      string          `json:"text"`
	Parsed    json.RawMessage `json:"parsed"`
	ToolCalls []named         `json:"toolCalls"`
}

// named is a member with a name: a tool, a tool call.
type named struct {
	Name string `json:"name"`
}

func (s *soaker) plain(ctx context.Context, n int) error {
	var a soakAnswer
	if err := s.do(ctx, http.MethodPost, "/v1/sample", soakBody{Prompt: fmt.Sprintf("Soak %d: what is the capital of France?", n), MaxTokens: 50},
		http.StatusOK, &a); err != nil {
		return err
	}
	if a.Text == "" {
		return errors.New("no text")
	}
	return nil
}

// schema samples at path with sideSchema and wants a parsed value.
func (s *soaker) schema(path string) func(context.Context, int) error {
	return func(ctx context.Context, n int) error {
		var a soakAnswer
		if err := s.do(ctx, http.MethodPost, path, soakBody{Prompt: fmt.Sprintf("Soak %d: describe Paris.", n), MaxTokens: 100, Schema: json.RawMessage(sideSchema)},
			http.StatusOK, &a); err != nil {
			return err
		}
		if len(a.Parsed) == 0 || string(a.Parsed) == "null" {
			return fmt.Errorf("%s: nothing parsed", path)
		}
		return nil
	}
}

// weatherTool is the tool of the soak's tools samples.
const weatherTool = "get_weather"

// tools samples at path with one tool and wants a call of it.
func (s *soaker) tools(path string) func(context.Context, int) error {
	return func(ctx context.Context, n int) error {
		var a soakAnswer
		if err := s.do(ctx, http.MethodPost, path, soakBody{Prompt: fmt.Sprintf("Soak %d: the weather in Paris?", n), MaxTokens: 100, Tools: []soakTool{{
			Name: weatherTool, Description: "The weather in a city.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}}}, http.StatusOK, &a); err != nil {
			return err
		}
		if len(a.ToolCalls) == 0 || a.ToolCalls[0].Name != weatherTool {
			return fmt.Errorf("%s: no call of %s", path, weatherTool)
		}
		return nil
	}
}

// connectMCP opens a session with sampled's MCP server, as a client
// without the sampling capability: sampled's providers answer.
func (s *soaker) connectMCP(ctx context.Context) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "sampled-soak", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + "/mcp", HTTPClient: s.client}, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp: connect: %w", err)
	}
	return cs, nil
}

// mcpCall calls the sample tool of sampled's MCP server, on the soak's
// session or, every fifth call, on a session of its own that it closes.
func (s *soaker) mcpCall(ctx context.Context, n int) error {
	cs := s.session
	if s.mcpCalls.Add(1)%5 == 0 {
		own, err := s.connectMCP(ctx)
		if err != nil {
			return err
		}
		defer own.Close()
		cs = own
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{
		"maxTokens": 50,
		"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": fmt.Sprintf("Soak %d: say hello.", n)}}},
	}})
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	if res.IsError {
		return fmt.Errorf("mcp: the tool failed: %v", res.Content)
	}
	return nil
}

// streamError is a stream that missed or repeated an event, or did not
// reach its terminal event.
type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

// loop starts a loop whose model calls the sampling peer's tool (which
// asks sampled to sample through the host), and follows its events,
// disconnecting after one to three events each time and resuming from the
// last id: every event must come once, in order, to loop.completed.
func (s *soaker) loop(ctx context.Context, n int) error {
	var started struct {
		ID string `json:"id"`
	}
	if err := s.do(ctx, http.MethodPost, "/v1/loops", soakBody{Prompt: fmt.Sprintf("Soak %d: ask the peer.", n),
		AllowedTools: []string{peerTool}, MaxIterations: 3}, http.StatusCreated, &started); err != nil {
		return err
	}
	next := int64(1)
	for range 20 {
		done, err := s.follow(ctx, started.ID, &next, 1+mrand.IntN(3))
		if err != nil || done {
			return err
		}
	}
	return &streamError{fmt.Sprintf("loop %s: no loop.completed after 20 connections (%d events)", started.ID, next-1)}
}

// follow reads the events of loop id from *next on, and returns at the
// terminal event (done), after cut events (disconnecting), or when the
// stream ends.
func (s *soaker) follow(ctx context.Context, id string, next *int64, cut int) (done bool, err error) {
	ctx, disconnect := context.WithCancel(ctx)
	defer disconnect()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/loops/"+id+"/events", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *next > 1 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*next-1, 10))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return false, fmt.Errorf("loop %s: events: status %d: %s", id, resp.StatusCode, b)
	}
	read := 0
	for ev, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			return false, fmt.Errorf("loop %s: events: %w", id, err)
		}
		if got := ev.LastEventID; got != strconv.FormatInt(*next, 10) {
			return false, &streamError{fmt.Sprintf("loop %s: event id %s after %d", id, got, *next-1)}
		}
		*next++
		var data struct {
			Name    string `json:"name"`
			IsError bool   `json:"isError"`
			Status  string `json:"status"`
			Error   string `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
			return false, fmt.Errorf("loop %s: %s: %w", id, ev.Type, err)
		}
		switch {
		case ev.Type == "tool.completed" && data.IsError:
			return false, fmt.Errorf("loop %s: %s failed: %.300s", id, data.Name, ev.Data)
		case ev.Type == "loop.completed" && data.Status != "completed":
			return false, fmt.Errorf("loop %s: ended %s: %s", id, data.Status, data.Error)
		case ev.Type == "loop.completed":
			return true, nil
		}
		if read++; read == cut {
			return false, nil
		}
	}
	return false, nil
}

// soakUpstream is the soak's OpenAI upstream. It answers chat completions
// after upstreamDelay: a JSON value when asked for one, a call of the
// first tool when given tools (the peer's sample tool with a sampling
// request as its arguments, others with a city) until a tool result
// comes, and text otherwise. It fails the first try of some distinct
// bodies (see the fault constants) and refuses any other key than key.
type soakUpstream struct {
	key string

	mu        sync.Mutex
	seen, old map[[32]byte]bool // bodies seen, this minute and the one before
	rotated   time.Time
}

// first reports whether body is new (not seen for a minute or more), and
// marks it seen.
func (f *soakUpstream) first(body []byte) bool {
	h := sha256.Sum256(body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.rotated) > time.Minute {
		f.old, f.seen, f.rotated = f.seen, map[[32]byte]bool{}, now
	}
	if f.seen[h] || f.old[h] {
		return false
	}
	f.seen[h] = true
	return true
}

func (f *soakUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		http.Error(w, "soak upstream: wrong key", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "soak upstream: "+err.Error(), http.StatusBadRequest)
		return
	}
	answer, err := replyTo(req)
	if err != nil {
		http.Error(w, "soak upstream: "+err.Error(), http.StatusInternalServerError)
		return
	}
	fault := 1.0
	if f.first(body) {
		fault = mrand.Float64()
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case fault < fault429:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"soak: slow down","type":"rate_limit_error"}}`)
	case fault < fault429+fault500:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"soak: failure","type":"server_error"}}`)
	case fault < fault429+fault500+faultHang:
		<-r.Context().Done() // sampled's call timeout ends it
	case fault < fault429+fault500+faultHang+faultSlow:
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = w.Write(answer[:len(answer)/2])
		_ = http.NewResponseController(w).Flush()
		if wait(r.Context(), slowAnswer) {
			_, _ = w.Write(answer[len(answer)/2:])
		}
	default:
		if wait(r.Context(), upstreamDelay) {
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
			_, _ = w.Write(answer)
		}
	}
}

// chatRequest is what the soak's upstream reads of a chat completion
// request.
type chatRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

// replyTo is the soak upstream's answer to req, a chat completion in
// OpenAI's documented shape (sidechild.go's for text).
func replyTo(req chatRequest) ([]byte, error) {
	var prompt, last string
	for _, m := range req.Messages {
		if m.Role == "user" && prompt == "" {
			prompt = string(m.Content)
		}
		last = m.Role
	}
	switch {
	case len(req.ResponseFormat) > 0:
		return schemaCompletion, nil
	case len(req.Tools) == 0 || last == "tool" || string(req.ToolChoice) == `"none"`:
		return plainCompletion, nil
	}
	name, args := req.Tools[0].Function.Name, []byte(`{"city":"Paris"}`)
	if strings.HasSuffix(name, "__sample") {
		// A sampling request of its own for each prompt: the fake tells
		// first tries by their bodies.
		var err error
		if args, err = json.Marshal(map[string]any{"params": map[string]any{"maxTokens": 50, "messages": []any{
			map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "Say hello for " + prompt}},
		}}}); err != nil {
			return nil, err
		}
	}
	type obj = map[string]any
	return json.Marshal(obj{"id": "chatcmpl-soak", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-mini",
		"choices": []obj{{"index": 0, "finish_reason": "tool_calls", "message": obj{"role": "assistant", "content": nil,
			"tool_calls": []obj{{"id": "call_1", "type": "function", "function": obj{"name": name, "arguments": string(args)}}}}}},
		"usage": obj{"prompt_tokens": 14, "completion_tokens": 8, "total_tokens": 22}})
}
