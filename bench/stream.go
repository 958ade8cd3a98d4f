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
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sampled/sampled/internal/chat"
)

// The streaming measurement (-stream) puts sampled's OpenAI-compatible
// chat completions, streamed, beside a floor that streams: a pass-through
// that copies the upstream's events to its client as they come. A fake
// upstream sends each answer as -chunks chunks, -gap apart. Per round it
// measures, for each side:
//
//   - c=1: -seq streams to each side, the sides' streams interleaved one by
//     one, with the fake itself as a third target: the time to the first
//     event and the gaps between consecutive events as the client sees them;
//   - CPU: -c streams at once for -d, the gateway's CPU time (from /proc)
//     per chunk delivered;
//   - memory: -streams streams held open at once by a fake that waits -hold
//     between chunks, the resident memory of a fresh gateway process;
//   - chat: non-streamed chat completions at -c for -d, the gateway's CPU
//     time per request, as -side measures /v1/sample.

// The sub-commands of the streaming measurement; sampled is -side's.
const (
	subStreamFake   = "-stream-fake"   // the fake upstream that streams
	subStreamFloor  = "-stream-floor"  // the pass-through floor
	subStreamClient = "-stream-client" // the streaming load client
)

// isStreamChild reports whether arg names a sub-command of the streaming
// measurement.
func isStreamChild(arg string) bool {
	switch arg {
	case subStreamFake, subStreamFloor, subStreamClient:
		return true
	}
	return false
}

// streamModel is the model the client asks for: the name -side configures
// sampled's openai provider with, which the floor passes on as it is.
const streamModel = "gpt-4o-mini"

// memoryChunks is the number of chunks of each answer in the memory phase:
// the first at once, the others -hold apart, so that a stream stays open
// for (memoryChunks-1) × hold.
const memoryChunks = 5

// streamOptions configure the streaming measurement.
type streamOptions struct {
	rounds     int
	chunks     int           // chunks of each streamed answer
	gap        time.Duration // time between them
	seq        int           // streams to each side at c=1, interleaved
	c          int           // concurrency of the CPU phases
	d          time.Duration // duration of each CPU phase
	streams    int           // streams held open in the memory phase
	hold       time.Duration // time between chunks in the memory phase
	cpuprofile string        // base name of the CPU profiles; "" takes none
}

// streamBody is what the client posts to every side: a plain chat
// completion, streamed with its usage, or not streamed.
func streamBody(stream bool) ([]byte, error) {
	req := chat.Request{
		Model:    streamModel,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: chat.Text("Tell me about Paris.")}},
		Stream:   stream,
	}
	if stream {
		req.StreamOptions = &chat.StreamOptions{IncludeUsage: true}
	}
	return json.Marshal(req)
}

// Metrics of the streaming table, beside sideKey's.
const (
	mTTFB        = "ttfb"        // µs to the first event at c=1, median
	mGapP99      = "gapP99"      // µs, p99 of the gaps between events at c=1
	mTotal       = "total"       // ms a whole stream takes at c=1, median
	mChunkRate   = "chunkRate"   // chunks per second at c=-c
	mChunkCPU    = "chunkCPU"    // µs of the gateway's CPU per chunk at c=-c
	mChunkFake   = "chunkFake"   // µs of the fake's CPU per chunk at c=-c
	mChunkClient = "chunkClient" // µs of the client's CPU per chunk at c=-c
	mLoadGapP99  = "loadGapP99"  // µs, p99 of the gaps at c=-c
	mChatCPU     = "chatCPU"     // µs of the gateway's CPU per non-streamed completion
	mChatRPS     = "chatRPS"     // non-streamed completions per second
)

// runStream runs the streaming measurement and prints its table and
// targets.
func runStream(ctx context.Context, o streamOptions, stdout io.Writer) error {
	body, err := streamBody(true)
	if err != nil {
		return err
	}
	whole, err := streamBody(false)
	if err != nil {
		return err
	}
	fake, err := startChild(ctx, subStreamFake, "-chunks", strconv.Itoa(o.chunks), "-gap", o.gap.String())
	if err != nil {
		return err
	}
	defer fake.stop()
	slow, err := startChild(ctx, subStreamFake, "-chunks", strconv.Itoa(memoryChunks), "-gap", o.hold.String())
	if err != nil {
		return err
	}
	defer slow.stop()
	gateways := map[string]*child{}
	for _, side := range []string{sideFloor, sideSampled} {
		g, err := startStreamGateway(ctx, side, fake.url)
		if err != nil {
			return err
		}
		defer g.stop()
		gateways[side] = g
	}
	url := func(side string) string {
		switch side {
		case sideDirect:
			return fake.url + "/v1/chat/completions"
		case sideSampled:
			return gateways[side].url + "/openai/v1/chat/completions"
		}
		return gateways[side].url + "/v1/chat/completions"
	}
	streamFor := time.Duration(o.chunks-1) * o.gap
	fmt.Fprintf(stdout, "streaming side by side: fake upstream, floor pass-through, sampled (/openai/v1/chat/completions) and the load client each in its own process\n")
	fmt.Fprintf(stdout, "%d rounds; answers of %d chunks %s apart (%s a stream); c=1 over %d streams to each side, interleaved; "+
		"CPU at c=%d for %s; %d streams held open (%d chunks %s apart); non-streamed completions at c=%d for %s\n",
		o.rounds, o.chunks, o.gap, streamFor, o.seq, o.c, o.d, o.streams, memoryChunks, o.hold, o.c, o.d)

	// Warm up connections, caches and the heaps of both gateways.
	for _, side := range []string{sideDirect, sideFloor, sideSampled} {
		if _, err := runStreamLoad(ctx, url(side), body, o.chunks, o.gap, o.c, 0, min(o.d, time.Second)); err != nil {
			return fmt.Errorf("warm-up %s: %w", side, err)
		}
		if side != sideDirect {
			if _, err := runClient(ctx, url(side), whole, o.c, 0, min(o.d, time.Second)); err != nil {
				return fmt.Errorf("warm-up %s, not streamed: %w", side, err)
			}
		}
	}

	vals := samples{}
	add := func(side, metric string, v float64) { vals.add("stream", side, metric, v) }
	for r := range o.rounds {
		order := inTurn(r, sideFloor, sideSampled)
		fmt.Fprintf(stdout, "round %d/%d: %s first\n", r+1, o.rounds, order[0])

		sides := append([]string{sideDirect}, order...)
		var targets []target
		for _, side := range sides {
			targets = append(targets, target{URL: url(side), Body: body})
		}
		res, err := runStreamInterleaved(ctx, targets, o.seq, o.chunks, o.gap)
		if err != nil {
			return fmt.Errorf("c=1: %w", err)
		}
		for i, side := range sides {
			s := res[i]
			add(side, mTTFB, us(s.TTFBP50Ns))
			add(side, mGapP99, us(s.GapP99Ns))
			add(side, mTotal, us(s.TotalP50Ns)/1e3)
			fmt.Fprintf(stdout, "  %-7s c=1   first event %6.0fµs  gap p50 %6.0fµs  p99 %6.0fµs  stream %6.1fms\n",
				side, us(s.TTFBP50Ns), us(s.GapP50Ns), us(s.GapP99Ns), us(s.TotalP50Ns)/1e3)
		}

		for _, side := range order {
			res, err := measureStreamCPU(ctx, gateways[side].pid(), fake.pid(), url(side), body, o)
			if err != nil {
				return fmt.Errorf("%s c=%d: %w", side, o.c, err)
			}
			add(side, mChunkRate, res.perSecond())
			add(side, mChunkCPU, res.gateway)
			add(side, mChunkFake, res.upstream)
			add(side, mChunkClient, res.client)
			add(side, mLoadGapP99, us(res.GapP99Ns))
			fmt.Fprintf(stdout, "  %-7s c=%-3d %6.0f chunks/s  %5.2fµs CPU/chunk (fake %.2fµs, client %.2fµs)  gap p99 %6.0fµs\n",
				side, o.c, res.perSecond(), res.gateway, res.upstream, res.client, us(res.GapP99Ns))
		}

		for _, side := range order {
			res, err := measureThroughput(ctx, gateways[side].pid(), fake.pid(), url(side), whole, o.c, o.d)
			if err != nil {
				return fmt.Errorf("%s not streamed c=%d: %w", side, o.c, err)
			}
			add(side, mChatCPU, res.gateway)
			add(side, mChatRPS, res.perSecond())
			fmt.Fprintf(stdout, "  %-7s c=%-3d %6.0f completions/s (not streamed)  %6.1fµs CPU/request\n",
				side, o.c, res.perSecond(), res.gateway)
		}

		for _, side := range order {
			mem, err := measureStreamMemory(ctx, side, slow, body, o.streams, o.hold)
			if err != nil {
				return fmt.Errorf("memory %s: %w", side, err)
			}
			add(side, mInflight, float64(mem.inflight))
			add(side, mRSS, mem.rss)
			add(side, mHWM, mem.hwm)
			fmt.Fprintf(stdout, "  memory %-7s %d streams open: RSS %.1f MB, peak %.1f MB\n", side, mem.inflight, mem.rss, mem.hwm)
		}
	}
	printStreamTable(stdout, o, vals)

	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			fmt.Fprintf(stdout, "\nload average at the end (1, 5, 15 min): %s %s %s\n", f[0], f[1], f[2])
		}
	}

	if o.cpuprofile == "" {
		return nil
	}
	for _, side := range []string{sideFloor, sideSampled} {
		g := gateways[side]
		path := profilePath(o.cpuprofile, side, "stream")
		if err := g.command("profile " + path); err != nil {
			return err
		}
		res, err := measureStreamCPU(ctx, g.pid(), fake.pid(), url(side), body, o)
		if err != nil {
			return err
		}
		if err := g.command("stop-profile"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "CPU profile of %s, streamed, c=%d: %s (%.0f chunks/s, %.2fµs CPU/chunk while profiled)\n",
			side, o.c, path, res.perSecond(), res.gateway)

		path = profilePath(o.cpuprofile, side, "chat")
		if err := g.command("profile " + path); err != nil {
			return err
		}
		tr, err := measureThroughput(ctx, g.pid(), fake.pid(), url(side), whole, o.c, o.d)
		if err != nil {
			return err
		}
		if err := g.command("stop-profile"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "CPU profile of %s, not streamed, c=%d: %s (%.0f completions/s, %.1fµs CPU/request while profiled)\n",
			side, o.c, path, tr.perSecond(), tr.gateway)
	}
	return nil
}

// us converts nanoseconds to microseconds.
func us(ns int64) float64 { return float64(ns) / 1e3 }

// startStreamGateway starts the side's gateway in front of the streaming
// fake at base: the floor pass-through, or sampled as -side runs it.
func startStreamGateway(ctx context.Context, side, base string) (*child, error) {
	if side == sideSampled {
		return startChild(ctx, subSampled, "-upstream", base)
	}
	return startChild(ctx, subStreamFloor, "-upstream", base)
}

// streamCPUResult is one CPU phase: the client's result and the CPU time
// per chunk, in µs, of the gateway, the fake and the client.
type streamCPUResult struct {
	streamStats
	gateway, upstream, client float64
}

// perSecond is the rate of chunks delivered.
func (r streamCPUResult) perSecond() float64 {
	if r.ElapsedNs <= 0 {
		return 0
	}
	return float64(r.Events) / (float64(r.ElapsedNs) / 1e9)
}

// measureStreamCPU runs o.c streams at once for o.d against url and reads
// the CPU time that the gateway (process pid) and the fake spent per chunk
// delivered meanwhile. Streams under way when o.d ends are read to their
// end, so every chunk the gateway handled is counted.
func measureStreamCPU(ctx context.Context, pid, fake int, url string, body []byte, o streamOptions) (streamCPUResult, error) {
	g0, err := procCPU(pid)
	if err != nil {
		return streamCPUResult{}, err
	}
	f0, err := procCPU(fake)
	if err != nil {
		return streamCPUResult{}, err
	}
	res, err := runStreamLoad(ctx, url, body, o.chunks, o.gap, o.c, 0, o.d)
	if err != nil {
		return streamCPUResult{}, err
	}
	g1, err := procCPU(pid)
	if err != nil {
		return streamCPUResult{}, err
	}
	f1, err := procCPU(fake)
	if err != nil {
		return streamCPUResult{}, err
	}
	if res.Events == 0 {
		return streamCPUResult{}, errors.New("no chunk was delivered")
	}
	per := func(t time.Duration) float64 { return float64(t.Microseconds()) / float64(res.Events) }
	return streamCPUResult{streamStats: res, gateway: per(g1 - g0), upstream: per(f1 - f0), client: per(res.cpu)}, nil
}

// measureStreamMemory starts a fresh gateway of the side in front of the
// slow fake, opens n streams through it at once and reads its resident
// memory while the fake holds them open.
func measureStreamMemory(ctx context.Context, side string, slow *child, body []byte, n int, hold time.Duration) (memoryResult, error) {
	g, err := startStreamGateway(ctx, side, slow.url)
	if err != nil {
		return memoryResult{}, err
	}
	defer g.stop()
	u := g.url + "/v1/chat/completions"
	if side == sideSampled {
		u = g.url + "/openai/v1/chat/completions"
	}
	return watchMemory(g, slow, func() error {
		_, err := runStreamLoad(ctx, u, body, memoryChunks, hold, n, n, 0)
		return err
	})
}

// printStreamTable prints the medians over the rounds, sampled against
// the floor as the median of the rounds' ratios (differences for times),
// and the targets.
func printStreamTable(w io.Writer, o streamOptions, vals samples) {
	med := func(side, metric string) (float64, bool) {
		v := vals[sideKey{"stream", side, metric}]
		return median(v), len(v) > 0
	}
	paired := func(metric string, f func(s, fl float64) float64) float64 {
		return vals.paired("stream", metric, sideSampled, sideFloor, f)
	}
	cell := func(side, metric, format string) string {
		v, ok := med(side, metric)
		if !ok {
			return "—"
		}
		return fmt.Sprintf(format, v)
	}

	fmt.Fprintf(w, "\nmedians of %d rounds; sampled/floor is the median of the rounds' ratios (differences for times)\n", o.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "side\tc=1 first event\tc=1 gap p99\tc=1 stream\tc=%d chunks/s\tCPU/chunk\tfake CPU/chunk\tclient CPU/chunk\tc=%d gap p99\tchat CPU/req\tchat req/s\t\n", o.c, o.c)
	for _, side := range []string{sideDirect, sideFloor, sideSampled} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", side,
			cell(side, mTTFB, "%.0fµs"), cell(side, mGapP99, "%.0fµs"), cell(side, mTotal, "%.1fms"),
			cell(side, mChunkRate, "%.0f"), cell(side, mChunkCPU, "%.2fµs"), cell(side, mChunkFake, "%.2fµs"),
			cell(side, mChunkClient, "%.2fµs"), cell(side, mLoadGapP99, "%.0fµs"),
			cell(side, mChatCPU, "%.1fµs"), cell(side, mChatRPS, "%.0f"))
	}
	fmt.Fprintf(tw, "%s\t%+.0fµs\t%+.0fµs\t%+.2fms\t×%.2f\t×%.2f\t×%.2f\t×%.2f\t%+.0fµs\t×%.2f\t×%.2f\t\n", "sampled/floor",
		paired(mTTFB, diff), paired(mGapP99, diff), paired(mTotal, diff),
		paired(mChunkRate, ratio), paired(mChunkCPU, ratio), paired(mChunkFake, ratio),
		paired(mChunkClient, ratio), paired(mLoadGapP99, diff),
		paired(mChatCPU, ratio), paired(mChatRPS, ratio))
	_ = tw.Flush()

	fmt.Fprintf(w, "\nmemory: %d streams held open, %d chunks %s apart (a fresh process each)\n", o.streams, memoryChunks, o.hold)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "side\topen\tRSS\tpeak RSS (VmHWM)\t\n")
	for _, side := range []string{sideFloor, sideSampled} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", side, cell(side, mInflight, "%.0f"),
			cell(side, mRSS, "%.1f MB"), cell(side, mHWM, "%.1f MB"))
	}
	fmt.Fprintf(tw, "%s\t\t×%.2f\t×%.2f\t\n", "sampled/floor", paired(mRSS, ratio), paired(mHWM, ratio))
	_ = tw.Flush()

	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	ttfb, gap, cpu, chatCPU := paired(mTTFB, diff), paired(mGapP99, diff), paired(mChunkCPU, ratio), paired(mChatCPU, ratio)
	hwm, _ := med(sideSampled, mHWM)
	fmt.Fprintf(w, "\ntargets:\n")
	fmt.Fprintf(w, "  c=1 first event <= floor + 100µs:        %+.0fµs  %s\n", ttfb, met(ttfb <= 100))
	fmt.Fprintf(w, "  c=1 gap p99 <= floor + 0.5ms:            %+.0fµs  %s\n", gap, met(gap <= 500))
	fmt.Fprintf(w, "  CPU/chunk <= 2× floor:                   ×%.2f  %s\n", cpu, met(cpu <= 2))
	fmt.Fprintf(w, "  %d streams: sampled peak RSS <= 200 MB:  %.1f MB  %s\n", o.streams, hwm, met(hwm <= 200))
	fmt.Fprintf(w, "  not streamed CPU/request <= 1.5× floor:  ×%.2f  %s\n", chatCPU, met(chatCPU <= 1.5))
}

// streamChild runs a sub-command of the streaming measurement. The
// servers print "listening URL" and obey serveChild's commands; the
// client prints its streamStats as JSON (a JSON array of them, one for
// each target, when interleaved).
func streamChild(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	upstream := fs.String("upstream", "", "base URL of the fake upstream (floor)")
	chunks := fs.Int("chunks", 256, "chunks of each streamed answer (the fake sends, the client expects)")
	gap := fs.Duration("gap", 2*time.Millisecond, "time between chunks (the fake waits, the client's timeout allows)")
	url := fs.String("url", "", "URL the client posts to")
	body := fs.String("body", "", "body the client posts")
	targets := fs.String("targets", "", "JSON array of {url, body}: stream to each in turn, -n times")
	c := fs.Int("c", 1, "client concurrency")
	n := fs.Int("n", 0, "streams the client opens in all; 0 means until -d ends")
	d := fs.Duration("d", 0, "how long the client opens streams; 0 means until -n are opened")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case subStreamFake:
		if *chunks < 1 || *gap < 0 {
			return errors.New("the fake needs -chunks >= 1 and -gap >= 0")
		}
		return serveChild(ctx, &http.Server{Handler: newStreamFake(*chunks, *gap), ReadHeaderTimeout: 10 * time.Second}, stdin, stdout)
	case subStreamFloor:
		if *upstream == "" {
			return errors.New("-upstream is required")
		}
		return serveChild(ctx, serverLikeCmdServer(ctx, newStreamFloor(*upstream+"/v1/chat/completions")), stdin, stdout)
	}
	timeout := streamTimeout(*chunks, *gap)
	if *targets != "" {
		var ts []target
		if err := json.Unmarshal([]byte(*targets), &ts); err != nil || len(ts) == 0 || *n < 1 {
			return fmt.Errorf("the interleaved client needs -targets (a JSON array of {url, body}) and -n >= 1 (%v)", err)
		}
		res, err := interleaveStreams(ctx, ts, *n, *chunks, timeout)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(res)
	}
	if *url == "" || *c < 1 || (*n <= 0 && *d <= 0) {
		return errors.New("the client needs -url, -c >= 1 and -n or -d")
	}
	return json.NewEncoder(stdout).Encode(streamLoad(ctx, *url, []byte(*body), *chunks, *c, *n, *d, timeout))
}

// streamTimeout is the client's timeout for one stream: twice as long as
// the fake takes to send it, and 30 s to spare for a loaded machine.
func streamTimeout(chunks int, gap time.Duration) time.Duration {
	return 2*time.Duration(chunks)*gap + 30*time.Second
}

// runStreamLoad runs the streaming client in its own process: concurrency
// c, n streams (n > 0) or for d (d > 0), each answer of chunks chunks gap
// apart. Any failed stream is an error.
func runStreamLoad(ctx context.Context, url string, body []byte, chunks int, gap time.Duration, c, n int, d time.Duration) (streamStats, error) {
	var res streamStats
	ps, err := runSelf(ctx, &res, subStreamClient, "-url", url, "-body", string(body), "-chunks", strconv.Itoa(chunks),
		"-gap", gap.String(), "-c", strconv.Itoa(c), "-n", strconv.Itoa(n), "-d", d.String())
	if err != nil {
		return res, err
	}
	res.cpu = ps.UserTime() + ps.SystemTime()
	if res.Failed > 0 {
		return res, fmt.Errorf("%d of %d streams failed, the first: %s", res.Failed, res.Failed+res.Streams, res.FirstErr)
	}
	return res, nil
}

// runStreamInterleaved runs the interleaved streaming client in its own
// process and returns each target's result, in the order of targets.
func runStreamInterleaved(ctx context.Context, targets []target, n, chunks int, gap time.Duration) ([]streamStats, error) {
	tj, err := json.Marshal(targets)
	if err != nil {
		return nil, err
	}
	var res []streamStats
	if _, err := runSelf(ctx, &res, subStreamClient, "-targets", string(tj), "-n", strconv.Itoa(n),
		"-chunks", strconv.Itoa(chunks), "-gap", gap.String()); err != nil {
		return nil, err
	}
	if len(res) != len(targets) {
		return nil, fmt.Errorf("the interleaved client answered for %d targets of %d", len(res), len(targets))
	}
	return res, nil
}

// streamStats is what the streaming client reports for one target.
// Times are in nanoseconds: of the first event after the request was
// sent, of the gaps between consecutive events (every gap of every
// stream), and of whole streams up to [DONE].
type streamStats struct {
	Streams    int64  `json:"streams"`
	Failed     int64  `json:"failed"`
	FirstErr   string `json:"firstErr,omitempty"`
	Events     int64  `json:"events"` // chunk events of the streams that succeeded; [DONE] is not one
	ElapsedNs  int64  `json:"elapsedNs"`
	TTFBP50Ns  int64  `json:"ttfbP50Ns"`
	GapP50Ns   int64  `json:"gapP50Ns"`
	GapP99Ns   int64  `json:"gapP99Ns"`
	TotalP50Ns int64  `json:"totalP50Ns"`
	// cpu is the client process's CPU time, read by the bench when the
	// process has exited.
	cpu time.Duration
}

// streamTrace is what the client saw of one stream.
type streamTrace struct {
	ttfb   time.Duration // to the first event
	total  time.Duration // to [DONE]
	events int           // chunk events
	gaps   []time.Duration
	text   string // the content the chunks carried, when asked for
}

// streamOnce posts body to url and reads the answer's events up to
// [DONE], timing each as it is read. With assemble it decodes every chunk
// and gathers the content of its first choice.
func streamOnce(c *http.Client, url string, body []byte, assemble bool) (streamTrace, error) {
	var tr streamTrace
	start := time.Now()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return tr, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return tr, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	var text strings.Builder
	var last time.Time
	for {
		line, err := br.ReadSlice('\n')
		now := time.Now()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return tr, fmt.Errorf("after %d events: %w", tr.events, err)
		}
		data, ok := eventData(line)
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			tr.total = now.Sub(start)
			tr.text = text.String()
			return tr, nil
		}
		if tr.events == 0 {
			tr.ttfb = now.Sub(start)
		} else {
			tr.gaps = append(tr.gaps, now.Sub(last))
		}
		last = now
		tr.events++
		if assemble {
			var ch chat.Chunk
			if err := json.Unmarshal(data, &ch); err != nil {
				return tr, fmt.Errorf("event %d: %w", tr.events, err)
			}
			if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != nil {
				text.WriteString(*ch.Choices[0].Delta.Content)
			}
		}
	}
}

// eventData returns the data of a "data:" line of an event stream, without
// the space after the colon and the line's end.
func eventData(line []byte) ([]byte, bool) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return nil, false
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	return bytes.TrimPrefix(data, []byte(" ")), true
}

// streamClient is an http.Client that keeps up to c connections.
func streamClient(c int, timeout time.Duration) *http.Client {
	t := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c, IdleConnTimeout: time.Minute}
	return &http.Client{Transport: t, Timeout: timeout}
}

// streamLoad opens streams to url from c goroutines until n were opened
// (n > 0) or d has passed (d > 0), reads each to its end, and checks that
// each carried at least chunks events.
func streamLoad(ctx context.Context, url string, body []byte, chunks, c, n int, d, timeout time.Duration) streamStats {
	client := streamClient(c, timeout)
	defer client.CloseIdleConnections()
	var (
		mu     sync.Mutex
		gaps   []time.Duration
		ttfbs  []time.Duration
		events atomic.Int64
	)
	res := load(ctx, c, n, d, func() error {
		tr, err := streamOnce(client, url, body, false)
		if err == nil && tr.events < chunks {
			err = fmt.Errorf("%d events, want at least %d", tr.events, chunks)
		}
		if err != nil {
			return err
		}
		events.Add(int64(tr.events))
		mu.Lock()
		gaps = append(gaps, tr.gaps...)
		ttfbs = append(ttfbs, tr.ttfb)
		mu.Unlock()
		return nil
	})
	out := streamStats{Streams: res.OK, Failed: res.Failed, FirstErr: res.FirstErr, Events: events.Load(),
		ElapsedNs: res.ElapsedNs, TotalP50Ns: res.P50Ns}
	out.setTimes(ttfbs, gaps)
	return out
}

// setTimes sets the medians and the gaps' p99 from the unsorted times.
func (s *streamStats) setTimes(ttfbs, gaps []time.Duration) {
	if len(ttfbs) > 0 {
		slices.Sort(ttfbs)
		s.TTFBP50Ns = int64(quantile(ttfbs, .50))
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		s.GapP50Ns, s.GapP99Ns = int64(quantile(gaps, .50)), int64(quantile(gaps, .99))
	}
}

// interleaveStreams opens n streams to each target, one at a time, one to
// each target in turn, the first of a turn moving by one, as interleave
// does with requests. Every stream must carry the fake's answer, whole;
// any failure ends it.
func interleaveStreams(ctx context.Context, targets []target, n, chunks int, timeout time.Duration) ([]streamStats, error) {
	want := fakeAnswer(chunks)
	clients := make([]*http.Client, len(targets))
	for i := range clients {
		clients[i] = streamClient(1, timeout)
		defer clients[i].CloseIdleConnections()
	}
	type times struct{ ttfb, total, gaps []time.Duration }
	all := make([]times, len(targets))
	res := make([]streamStats, len(targets))
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		for k := range targets {
			j := (i + k) % len(targets)
			tr, err := streamOnce(clients[j], targets[j].URL, targets[j].Body, true)
			if err == nil && tr.text != want {
				err = fmt.Errorf("the stream carried %q, want %q", clip(tr.text), clip(want))
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", targets[j].URL, err)
			}
			all[j].ttfb = append(all[j].ttfb, tr.ttfb)
			all[j].total = append(all[j].total, tr.total)
			all[j].gaps = append(all[j].gaps, tr.gaps...)
			res[j].Streams++
			res[j].Events += int64(tr.events)
			// As interleave: the work a gateway does after its stream is
			// done before the next side's stream starts.
			for answered := time.Now(); time.Since(answered) < settle; {
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for j := range res {
		res[j].ElapsedNs = int64(time.Since(start))
		res[j].setTimes(all[j].ttfb, all[j].gaps)
		slices.Sort(all[j].total)
		res[j].TotalP50Ns = int64(quantile(all[j].total, .50))
	}
	return res, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// fakeWords are the fragments of the fake's answers, one a chunk, in turn.
var fakeWords = strings.Fields("Paris is the capital of France and its largest city, on the Seine, " +
	"with about two million people in the city proper and twelve million in its region.")

// fakeFragment is the content of chunk i of a streamed answer.
func fakeFragment(i int) string {
	w := fakeWords[i%len(fakeWords)]
	if i > 0 {
		w = " " + w
	}
	return w
}

// fakeAnswer is the content of a streamed answer of n chunks.
func fakeAnswer(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(fakeFragment(i))
	}
	return b.String()
}

// streamFake is the OpenAI fake upstream that streams: a request with
// "stream": true is answered with chunks chunk events gap apart, each
// flushed as it is written and carrying one fragment of the answer (the
// first with the role as well, as OpenAI's first content does), then the
// chunk with the finish reason, the usage chunk when stream_options asks
// for it, and [DONE]. Other requests get the -side fake's whole answer.
// GET /inflight reports how many requests it holds.
type streamFake struct {
	gap      time.Duration
	events   [][]byte // the chunk events, then the finishing one
	usage    []byte
	inflight atomic.Int64
}

// fakeCreated is the "created" time of the fake's chunks.
const fakeCreated = 1700000000

func newStreamFake(chunks int, gap time.Duration) *streamFake {
	f := &streamFake{gap: gap}
	event := func(c chat.Chunk) []byte {
		c.ID, c.Object, c.Created, c.Model = "chatcmpl-bench", chat.ObjectChunk, fakeCreated, streamModel
		b, err := json.Marshal(c)
		if err != nil {
			panic(err) // the chunks are made here and always encode
		}
		return append(append([]byte("data: "), b...), "\n\n"...)
	}
	null := json.RawMessage("null")
	for i := range chunks {
		text := fakeFragment(i)
		delta := chat.ChunkDelta{Content: &text}
		if i == 0 {
			delta.Role = chat.RoleAssistant
		}
		f.events = append(f.events, event(chat.Chunk{Choices: []chat.ChunkChoice{{Delta: delta, Logprobs: null}}}))
	}
	stop := chat.FinishStop
	f.events = append(f.events, event(chat.Chunk{Choices: []chat.ChunkChoice{{FinishReason: &stop, Logprobs: null}}}))
	f.usage = event(chat.Chunk{Choices: []chat.ChunkChoice{},
		Usage: &chat.Usage{PromptTokens: 12, CompletionTokens: chunks, TotalTokens: 12 + chunks}})
	return f
}

var doneEvent = []byte("data: [DONE]\n\n")

func (f *streamFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	var req chat.Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !req.Stream {
		writeCompletion(w, body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	var tick <-chan time.Time
	if f.gap > 0 {
		t := time.NewTicker(f.gap)
		defer t.Stop()
		tick = t.C
	}
	last := len(f.events) - 1
	for i, ev := range f.events {
		if i > 0 && i < last && tick != nil {
			select {
			case <-tick:
			case <-r.Context().Done():
				return
			}
		}
		if !send(ev) {
			return
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage && !send(f.usage) {
		return
	}
	_, _ = w.Write(doneEvent)
}

// streamFloor is the least Go code that passes a chat completion through:
// net/http's server, encoding/json and one pooled http.Client. It decodes
// the request, sends it on as it is and, streamed, copies the upstream's
// event stream to its client line by line, flushing after each event; not
// streamed, it decodes the upstream's completion and encodes it to its
// client. No validation, logging or metrics.
type streamFloor struct {
	upstream string
	client   *http.Client
}

// newStreamFloor returns the floor pass-through for the chat completions
// URL, with the floor gateway's pool.
func newStreamFloor(chatURL string) *streamFloor {
	f := newFloorGateway(chatURL)
	return &streamFloor{upstream: f.upstream, client: f.client}
}

func (f *streamFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in chat.Request
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := json.Marshal(in)
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
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		http.Error(w, fmt.Sprintf("upstream: status %d", resp.StatusCode), http.StatusBadGateway)
		return
	}
	if !in.Stream {
		var out chat.Response
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadSlice('\n')
		if _, werr := w.Write(line); werr != nil {
			return
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // the rest of a long line
		case err != nil:
			return // the upstream's end, or its failure
		case len(bytes.TrimSpace(line)) == 0: // an event's end
			if rc.Flush() != nil {
				return
			}
		}
	}
}
