package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/telemetry"
)

// The side-by-side measurement runs every program in its own process: this
// binary, re-run with one of these sub-commands.
const (
	subFake    = "-side-fake"    // the OpenAI fake upstream
	subFloor   = "-side-floor"   // the minimal Go gateway
	subSampled = "-side-sampled" // sampled, as cmd/server runs it
	subClient  = "-side-client"  // the load generator
)

// isSideChild reports whether arg names a sub-command of the side-by-side
// measurement.
func isSideChild(arg string) bool {
	switch arg {
	case subFake, subFloor, subSampled, subClient, subInterleave, subOTLP:
		return true
	}
	return isStreamChild(arg)
}

// sideChild runs the sub-command args[0]. A server prints "listening URL"
// on stdout, then obeys the lines it reads on stdin (see serveChild) until
// stdin ends; the client prints its loadResult as JSON.
func sideChild(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if isStreamChild(args[0]) {
		return streamChild(ctx, args, stdin, stdout)
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	upstream := fs.String("upstream", "", "base URL of the fake upstream (gateways)")
	delay := fs.Duration("delay", 0, "how long the fake waits before it answers")
	url := fs.String("url", "", "URL the client posts to")
	body := fs.String("body", "", "body the client posts")
	c := fs.Int("c", 1, "client concurrency")
	n := fs.Int("n", 0, "requests the client sends in all; 0 means until -d ends")
	d := fs.Duration("d", 0, "how long the client sends; 0 means until -n are sent")
	timeout := fs.Duration("timeout", 30*time.Second, "client timeout per request")
	targets := fs.String("targets", "", "JSON array of {url, body} the interleaved client posts to")
	otlp := fs.String("otlp", "", "base URL of an OTLP/HTTP receiver: sampled traces, exporting there")
	contract := fs.Bool("contract", false, "the floor gateway doing sampled's contract (contractFloor)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case subFake:
		return serveChild(ctx, &http.Server{Handler: newFakeUpstream(*delay), ReadHeaderTimeout: 10 * time.Second}, stdin, stdout)
	case subFloor:
		if *upstream == "" {
			return errors.New("-upstream is required")
		}
		if *otlp != "" {
			stop, err := startTracing(ctx, *otlp)
			if err != nil {
				return err
			}
			defer func() { _ = stop(context.WithoutCancel(ctx)) }()
			return serveChild(ctx, serverLikeCmdServer(ctx, newTracedFloor(*upstream+"/v1/chat/completions")), stdin, stdout)
		}
		if *contract {
			return contractChild(ctx, *upstream, stdin, stdout)
		}
		return serveChild(ctx, serverLikeCmdServer(ctx, newFloorGateway(*upstream+"/v1/chat/completions")), stdin, stdout)
	case subSampled:
		if *upstream == "" {
			return errors.New("-upstream is required")
		}
		return sampledChild(ctx, *upstream, *otlp, stdin, stdout)
	case subOTLP:
		return serveChild(ctx, &http.Server{Handler: newOTLPSink(), ReadHeaderTimeout: 10 * time.Second}, stdin, stdout)
	case subInterleave:
		return interleaveChild(ctx, *targets, *n, *timeout, stdout)
	default:
		if *url == "" || *c < 1 || (*n <= 0 && *d <= 0) {
			return errors.New("the client needs -url, -c >= 1 and -n or -d")
		}
		return clientChild(ctx, *url, []byte(*body), *c, *n, *d, *timeout, stdout)
	}
}

// serverLikeCmdServer returns an http.Server for h with the settings of
// cmd/server, so that the floor and sampled pay the same server costs
// (deadlines per request) and differ only in their handlers.
func serverLikeCmdServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      15 * time.Minute,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}

// sampledChild serves sampled configured for the OpenAI fake at upstream,
// as cmd/server does: app.New with a JSON log handler, writing each
// request's log line to /dev/null through cmd/server's LogWriter, so that
// its cost is counted.
func sampledChild(ctx context.Context, upstream, otlp string, stdin io.Reader, stdout io.Writer) error {
	if otlp != "" {
		stop, err := startTracing(ctx, otlp)
		if err != nil {
			return err
		}
		defer func() { _ = stop(context.WithoutCancel(ctx)) }()
	}
	logs, closeLogs, err := devNullLogs()
	if err != nil {
		return err
	}
	defer closeLogs()
	a, err := newSampled(ctx, upstream, logs)
	if err != nil {
		return err
	}
	defer a.Close()
	return serveChild(ctx, serverLikeCmdServer(ctx, a.Handler), stdin, stdout)
}

// contractChild serves the contract floor for the fake at upstream,
// logging to /dev/null through cmd/server's LogWriter as sampledChild does.
func contractChild(ctx context.Context, upstream string, stdin io.Reader, stdout io.Writer) error {
	logs, closeLogs, err := devNullLogs()
	if err != nil {
		return err
	}
	defer closeLogs()
	return serveChild(ctx, serverLikeCmdServer(ctx, newContractFloor(upstream+"/v1/chat/completions", logs)), stdin, stdout)
}

// devNullLogs is where a gateway child writes its log: /dev/null, through
// cmd/server's LogWriter, so that the log's cost is counted as the
// service pays it. closeLogs writes what is held and closes the file.
func devNullLogs() (logs io.Writer, closeLogs func(), err error) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	w := telemetry.NewLogWriter(devNull, telemetry.LogFlushEvery)
	return w, func() { _ = w.Close(); _ = devNull.Close() }, nil
}

// startTracing turns tracing on, as cmd/server does, exporting to the
// OTLP/HTTP receiver at otlp.
func startTracing(ctx context.Context, otlp string) (stop func(context.Context) error, err error) {
	return telemetry.Setup(ctx, func(k string) string {
		if k == telemetry.EnvEndpoint {
			return otlp
		}
		return ""
	}, "bench")
}

// newSampled assembles sampled as the measurement runs it: the OpenAI
// fake at upstream, every request's log line written to logs.
func newSampled(ctx context.Context, upstream string, logs io.Writer) (*app.App, error) {
	env := map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": upstream + "/v1", "SAMPLING_MODEL": "gpt-4o-mini"}
	cfg, err := config.Load(func(k string) string { return env[k] }, nil)
	if err != nil {
		return nil, err
	}
	// The memory phase holds more requests in flight than the default cap
	// (limits.inFlightSamples) admits; an operator raises it the same way.
	cfg.Limits.InFlightSamples = 4096
	return app.New(ctx, app.Options{Config: cfg, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
}

// serveChild serves srv on a loopback port and prints "listening URL".
// Then it reads commands, one a line, and answers each with "ok" or
// "error: ...": "profile PATH" starts a CPU profile into PATH,
// "stop-profile" ends it. When stdin ends (the bench is done, or gone) or
// ctx ends, it shuts srv down.
func serveChild(ctx context.Context, srv *http.Server, stdin io.Reader, stdout io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening http://%s\n", ln.Addr())

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var profile *os.File
	stopProfile := func() error {
		if profile == nil {
			return errors.New("no profile running")
		}
		pprof.StopCPUProfile()
		err := profile.Close()
		profile = nil
		return err
	}
	defer func() {
		if profile != nil {
			_ = stopProfile()
		}
	}()
loop:
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
			break loop
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			err := obey(line, &profile, stopProfile)
			if err != nil {
				fmt.Fprintf(stdout, "error: %v\n", err)
			} else {
				fmt.Fprintln(stdout, "ok")
			}
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// obey runs one command of serveChild.
func obey(line string, profile **os.File, stopProfile func() error) error {
	cmd, arg, _ := strings.Cut(line, " ")
	switch cmd {
	case "profile":
		if *profile != nil {
			return errors.New("a profile is already running")
		}
		f, err := os.Create(arg)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		*profile = f
		return nil
	case "stop-profile":
		return stopProfile()
	default:
		return fmt.Errorf("unknown command %q", line)
	}
}

// The fake upstream's answers: a chat.completion in OpenAI's documented
// shape, with a text answer, or with a JSON answer that satisfies
// sideSchema when the request asks for a response format.
var (
	plainCompletion  = completionWith("Paris is the capital of France.")
	schemaCompletion = completionWith(`{"city":"Paris","country":"France","population":2102650}`)
)

func completionWith(content string) []byte {
	c, err := json.Marshal(content)
	if err != nil {
		panic(err) // a string always marshals
	}
	return []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + string(c) + `,"refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":14,"completion_tokens":8,"total_tokens":22}}`)
}

// fakeUpstream answers POST /v1/chat/completions after delay. GET /inflight
// reports how many requests it holds.
type fakeUpstream struct {
	delay    time.Duration
	inflight atomic.Int64
}

func newFakeUpstream(delay time.Duration) *fakeUpstream { return &fakeUpstream{delay: delay} }

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/inflight" {
		_, _ = io.WriteString(w, strconv.FormatInt(f.inflight.Load(), 10))
		return
	}
	f.inflight.Add(1)
	defer f.inflight.Add(-1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if f.delay > 0 {
		t := time.NewTimer(f.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	writeCompletion(w, body)
}

// writeCompletion answers a chat completion request whole: with the JSON
// answer when body asks for a response format, else with the text one.
func writeCompletion(w http.ResponseWriter, body []byte) {
	answer := plainCompletion
	if bytes.Contains(body, []byte(`"response_format"`)) {
		answer = schemaCompletion
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	_, _ = w.Write(answer)
}

// floorGateway is the least Go code that does a gateway's work: net/http's
// server, encoding/json and one pooled http.Client, mapping
// {"prompt","maxTokens"} to one chat completion and its answer back to
// {"text"}. With a "schema" it asks the upstream for JSON output with that
// schema and json.Unmarshals the answer into "parsed" (parsing, not
// validating against the schema). No routing, validation, logging or
// metrics.
type floorGateway struct {
	upstream string
	client   *http.Client
}

// floorRequest is the part of a POST /v1/sample body the floor maps.
type floorRequest struct {
	Prompt    string          `json:"prompt"`
	MaxTokens int             `json:"maxTokens"`
	Schema    json.RawMessage `json:"schema,omitempty"`
}

// floorChat is the chat completion request the floor sends.
type floorChat struct {
	Model               string          `json:"model"`
	Messages            []floorMessage  `json:"messages"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	ResponseFormat      *floorJSONReply `json:"response_format,omitempty"`
}

type floorMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type floorJSONReply struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// floorCompletion is the part of a chat completion the floor reads.
type floorCompletion struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// floorResponse is the floor's answer.
type floorResponse struct {
	Text   string `json:"text"`
	Parsed any    `json:"parsed,omitempty"`
}

// newFloorGateway returns the floor gateway for the chat completions URL.
func newFloorGateway(chatURL string) *floorGateway {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return &floorGateway{upstream: chatURL, client: &http.Client{Transport: t}}
}

// chatFor maps the floor's request to a chat completion request.
func chatFor(in floorRequest) floorChat {
	c := floorChat{
		Model:               "gpt-4o-mini",
		Messages:            []floorMessage{{Role: "user", Content: in.Prompt}},
		MaxCompletionTokens: in.MaxTokens,
	}
	if len(in.Schema) > 0 {
		c.ResponseFormat = &floorJSONReply{Type: "json_schema"}
		c.ResponseFormat.JSONSchema.Name = "response"
		c.ResponseFormat.JSONSchema.Schema = in.Schema
	}
	return c
}

func (f *floorGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in floorRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := json.Marshal(chatFor(in))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, f.upstream, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	reply, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		http.Error(w, fmt.Sprintf("upstream: status %d, %v", resp.StatusCode, err), http.StatusBadGateway)
		return
	}
	var cc floorCompletion
	if err := json.Unmarshal(reply, &cc); err != nil || len(cc.Choices) == 0 {
		http.Error(w, "upstream: no answer", http.StatusBadGateway)
		return
	}
	out := floorResponse{Text: cc.Choices[0].Message.Content}
	if len(in.Schema) > 0 {
		if err := json.Unmarshal([]byte(out.Text), &out.Parsed); err != nil {
			http.Error(w, "upstream: the answer is not JSON", http.StatusBadGateway)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// loadResult is what the load client reports. Latencies are of the
// successful requests, in nanoseconds.
type loadResult struct {
	OK        int64  `json:"ok"`
	Failed    int64  `json:"failed"`
	FirstErr  string `json:"firstErr,omitempty"`
	ElapsedNs int64  `json:"elapsedNs"`
	P50Ns     int64  `json:"p50Ns"`
	P99Ns     int64  `json:"p99Ns"`
	// cpu is the client process's CPU time, user and system, read by the
	// bench when the process has exited.
	cpu time.Duration
}

// perSecond is the rate of successful requests.
func (r loadResult) perSecond() float64 {
	if r.ElapsedNs <= 0 {
		return 0
	}
	return float64(r.OK) / (float64(r.ElapsedNs) / 1e9)
}

// clientChild posts body to url from c goroutines over one pooled
// transport that keeps a connection per goroutine, and prints the result.
func clientChild(ctx context.Context, url string, body []byte, c, n int, d, timeout time.Duration, stdout io.Writer) error {
	t := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c, IdleConnTimeout: time.Minute}
	client := &http.Client{Transport: t, Timeout: timeout}
	defer client.CloseIdleConnections()
	res := load(ctx, c, n, d, func() error { return post(client, url, body) })
	return json.NewEncoder(stdout).Encode(res)
}

// load runs fn from c goroutines until n calls were made (n > 0) or d has
// passed (d > 0), whichever comes first, or ctx ends.
func load(ctx context.Context, c, n int, d time.Duration, fn func() error) loadResult {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var (
		tickets  atomic.Int64
		failed   atomic.Int64
		mu       sync.Mutex
		all      []time.Duration
		firstErr string
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range c {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil && (n <= 0 || tickets.Add(1) <= int64(n)) {
				t := time.Now()
				if err := fn(); err != nil {
					if failed.Add(1) == 1 {
						mu.Lock()
						firstErr = err.Error()
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res := loadResult{OK: int64(len(all)), Failed: failed.Load(), FirstErr: firstErr, ElapsedNs: int64(time.Since(start))}
	if len(all) > 0 {
		slices.Sort(all)
		res.P50Ns, res.P99Ns = int64(quantile(all, .50)), int64(quantile(all, .99))
	}
	return res
}

// quantile returns the q-quantile of the sorted, non-empty l.
func quantile(l []time.Duration, q float64) time.Duration {
	return l[int(q*float64(len(l)-1))]
}
