package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// sideOptions configure the side-by-side measurement.
type sideOptions struct {
	rounds     int
	n          int           // requests per latency measurement at c=1
	c          int           // concurrency of the throughput measurement
	d          time.Duration // duration of each throughput measurement
	inflight   int           // requests held in flight for the memory measurement
	delay      time.Duration // how long the slow upstream waits
	cpuprofile string        // base name of the CPU profiles; "" takes none
	floor      bool          // -trace: measure the floor gateway, not sampled
	contract   bool          // -side: measure the contract floor in sampled's place
}

// sideSchema is the schema of schema mode: three properties, all required.
const sideSchema = `{"type":"object","properties":{"city":{"type":"string"},"country":{"type":"string"},` +
	`"population":{"type":"integer","minimum":0}},"required":["city","country","population"],"additionalProperties":false}`

// sideMode is a sampling mode with the body a gateway receives and the
// body the fake receives when called directly.
type sideMode struct {
	name   string
	body   []byte
	direct []byte
}

func sideModes() ([]sideMode, error) {
	var modes []sideMode
	for _, m := range []struct {
		name string
		in   floorRequest
	}{
		{"plain", floorRequest{Prompt: "What is the capital of France?", MaxTokens: 100}},
		{"schema", floorRequest{Prompt: "Describe Paris.", MaxTokens: 100, Schema: json.RawMessage(sideSchema)}},
	} {
		body, err := json.Marshal(m.in)
		if err != nil {
			return nil, err
		}
		direct, err := json.Marshal(chatFor(m.in))
		if err != nil {
			return nil, err
		}
		modes = append(modes, sideMode{name: m.name, body: body, direct: direct})
	}
	return modes, nil
}

// The sides of the measurement.
const (
	sideDirect  = "direct"
	sideFloor   = "floor"
	sideSampled = "sampled"
)

// sideKey names one measured value: a mode ("" for memory), a side and a
// metric.
type sideKey struct{ mode, side, metric string }

// Metrics of the side-by-side table.
const (
	mP50         = "p50"         // µs at c=1
	mP99         = "p99"         // µs at c=1
	mRPS         = "rps"         // requests per second at c=-c
	mCPU         = "cpu"         // µs of the gateway's CPU per request at c=-c
	mUpstreamCPU = "upstreamCPU" // µs of the fake's CPU per request at c=-c
	mClientCPU   = "clientCPU"   // µs of the client's CPU per request at c=-c
	mInflight    = "inflight"    // requests in flight at once, memory phase
	mRSS         = "rss"         // MB resident with every request in flight
	mHWM         = "hwm"         // MB peak resident (VmHWM)
)

// runSide measures the fake upstream called directly, the floor gateway
// and sampled side by side, each in its own process, with the load client
// in another. Rounds alternate which gateway goes first in every phase.
func runSide(ctx context.Context, o sideOptions, stdout io.Writer) error {
	modes, err := sideModes()
	if err != nil {
		return err
	}
	fake, err := startChild(ctx, subFake)
	if err != nil {
		return err
	}
	defer fake.stop()
	slow, err := startChild(ctx, subFake, "-delay", o.delay.String())
	if err != nil {
		return err
	}
	defer slow.stop()
	gateways := map[string]*child{}
	for _, side := range []string{sideFloor, sideSampled} {
		g, err := startGateway(ctx, side, fake.url, o.contract)
		if err != nil {
			return err
		}
		defer g.stop()
		gateways[side] = g
	}
	url := func(side string) string {
		if side == sideDirect {
			return fake.url + "/v1/chat/completions"
		}
		return gateways[side].url + "/v1/sample"
	}
	body := func(m sideMode, side string) []byte {
		if side == sideDirect {
			return m.direct
		}
		return m.body
	}

	fmt.Fprintf(stdout, "side by side: fake upstream, floor gateway, sampled and the load client each in its own process\n")
	if o.contract {
		fmt.Fprintf(stdout, "on sampled's side: the contract floor, the floor gateway doing sampled's contract by the least code\n")
	}
	fmt.Fprintf(stdout, "%d rounds; c=1 latency over %d requests to each side, interleaved, c=%d throughput for %s, %d requests in flight on a %s upstream\n",
		o.rounds, o.n, o.c, o.d, o.inflight, o.delay)
	// Warm up connections, caches and the heap of both gateways.
	for _, m := range modes {
		for _, side := range []string{sideDirect, sideFloor, sideSampled} {
			if _, err := runClient(ctx, url(side), body(m, side), o.c, 0, min(o.d, time.Second)); err != nil {
				return fmt.Errorf("warm-up %s %s: %w", m.name, side, err)
			}
		}
	}

	vals := samples{}
	add := vals.add
	for r := range o.rounds {
		order := inTurn(r, sideFloor, sideSampled)
		fmt.Fprintf(stdout, "round %d/%d: %s first\n", r+1, o.rounds, order[0])
		for _, m := range modes {
			// c=1: the three sides' requests interleaved (see interleave).
			sides := append([]string{sideDirect}, order...)
			var targets []target
			for _, side := range sides {
				targets = append(targets, target{URL: url(side), Body: body(m, side)})
			}
			res, err := runInterleaved(ctx, targets, o.n)
			if err != nil {
				return fmt.Errorf("%s c=1: %w", m.name, err)
			}
			for i, side := range sides {
				p50, p99 := float64(res[i].P50Ns)/1e3, float64(res[i].P99Ns)/1e3
				add(m.name, side, mP50, p50)
				add(m.name, side, mP99, p99)
				fmt.Fprintf(stdout, "  %-6s %-7s c=1   p50 %6.0fµs  p99 %6.0fµs\n", m.name, side, p50, p99)
			}
		}
		for _, m := range modes {
			for _, side := range order {
				res, err := measureThroughput(ctx, gateways[side].pid(), fake.pid(), url(side), body(m, side), o.c, o.d)
				if err != nil {
					return fmt.Errorf("%s %s c=%d: %w", m.name, side, o.c, err)
				}
				add(m.name, side, mRPS, res.perSecond())
				add(m.name, side, mCPU, res.gateway)
				add(m.name, side, mUpstreamCPU, res.upstream)
				add(m.name, side, mClientCPU, res.client)
				fmt.Fprintf(stdout, "  %-6s %-7s c=%-3d %6.0f req/s  %6.1fµs CPU/request (fake %.1fµs, client %.1fµs)\n",
					m.name, side, o.c, res.perSecond(), res.gateway, res.upstream, res.client)
			}
		}
		for _, side := range order {
			mem, err := measureMemory(ctx, side, o.contract, slow, modes[0].body, o.inflight)
			if err != nil {
				return fmt.Errorf("memory %s: %w", side, err)
			}
			add("", side, mInflight, float64(mem.inflight))
			add("", side, mRSS, mem.rss)
			add("", side, mHWM, mem.hwm)
			fmt.Fprintf(stdout, "  memory %-7s %d in flight: RSS %.1f MB, peak %.1f MB\n", side, mem.inflight, mem.rss, mem.hwm)
		}
	}
	printSideTable(stdout, o, modes, vals)

	if o.cpuprofile == "" {
		return nil
	}
	for _, m := range modes {
		for _, side := range []string{sideFloor, sideSampled} {
			path := profilePath(o.cpuprofile, side, m.name)
			g := gateways[side]
			if err := g.command("profile " + path); err != nil {
				return err
			}
			res, err := measureThroughput(ctx, g.pid(), fake.pid(), url(side), body(m, side), o.c, o.d)
			if err != nil {
				return err
			}
			if err := g.command("stop-profile"); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "CPU profile of %s, %s, c=%d: %s (%.0f req/s, %.1fµs CPU/request while profiled)\n",
				side, m.name, o.c, path, res.perSecond(), res.gateway)
		}
	}
	return nil
}

// profilePath inserts "-side-mode" before the extension of base.
func profilePath(base, side, mode string) string {
	ext := filepath.Ext(base)
	return strings.TrimSuffix(base, ext) + "-" + side + "-" + mode + ext
}

// throughputResult is one throughput measurement: the client's result and
// the CPU time per request, in µs, of the gateway, the fake upstream and
// the client.
type throughputResult struct {
	loadResult
	gateway, upstream, client float64
}

// measureThroughput runs the client at concurrency c for d against url and
// reads the CPU time that the gateway (process pid), the fake (process
// fake) and the client spent per request meanwhile. The fake and the
// client share the machine with the gateway, so their costs bound the
// throughput too.
func measureThroughput(ctx context.Context, pid, fake int, url string, body []byte, c int, d time.Duration) (throughputResult, error) {
	var cpu0, cpu1 [2]time.Duration
	read := func(into *[2]time.Duration) error {
		for i, p := range []int{pid, fake} {
			t, err := procCPU(p)
			if err != nil {
				return err
			}
			into[i] = t
		}
		return nil
	}
	if err := read(&cpu0); err != nil {
		return throughputResult{}, err
	}
	res, err := runClient(ctx, url, body, c, 0, d)
	if err != nil {
		return throughputResult{}, err
	}
	if err := read(&cpu1); err != nil {
		return throughputResult{}, err
	}
	if res.OK == 0 {
		return throughputResult{}, errors.New("no request succeeded")
	}
	per := func(t time.Duration) float64 { return float64(t.Microseconds()) / float64(res.OK) }
	return throughputResult{loadResult: res, gateway: per(cpu1[0] - cpu0[0]), upstream: per(cpu1[1] - cpu0[1]), client: per(res.cpu)}, nil
}

// memoryResult is a gateway's memory with requests held in flight.
type memoryResult struct {
	inflight int     // the most requests the upstream held at once
	rss      float64 // MB resident when it held the most
	hwm      float64 // MB peak resident over the gateway's life
}

// measureMemory starts a fresh gateway of the side in front of the slow
// fake, sends it n requests at once and reads its resident memory while
// the fake holds them.
func measureMemory(ctx context.Context, side string, contract bool, slow *child, body []byte, n int) (memoryResult, error) {
	g, err := startGateway(ctx, side, slow.url, contract)
	if err != nil {
		return memoryResult{}, err
	}
	defer g.stop()
	return watchMemory(g, slow, func() error {
		_, err := runClient(ctx, g.url+"/v1/sample", body, n, n, 0)
		return err
	})
}

// watchMemory runs hold, which holds requests in flight through the
// gateway g to the slow fake, and meanwhile reads the gateway's resident
// memory whenever the fake holds the most requests yet; at the end it
// reads the gateway's peak.
func watchMemory(g, slow *child, hold func() error) (memoryResult, error) {
	done := make(chan error, 1)
	go func() { done <- hold() }()
	poll := &http.Client{Timeout: 5 * time.Second}
	defer poll.CloseIdleConnections()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var m memoryResult
	for {
		select {
		case err := <-done:
			if err != nil {
				return m, err
			}
			_, hwm, err := procMem(g.pid())
			if err != nil {
				return m, err
			}
			m.hwm = float64(hwm) / 1e6
			return m, nil
		case <-tick.C:
			held, err := inflight(poll, slow.url)
			if err != nil {
				return m, err
			}
			if held < m.inflight || held == 0 {
				continue
			}
			rss, _, err := procMem(g.pid())
			if err != nil {
				return m, err
			}
			if held > m.inflight || float64(rss)/1e6 > m.rss {
				m.inflight, m.rss = held, float64(rss)/1e6
			}
		}
	}
}

// inflight asks the fake at base how many requests it holds.
func inflight(c *http.Client, base string) (int, error) {
	resp, err := c.Get(base + "/inflight")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}

// printSideTable prints the medians over the rounds and, for sampled
// against the floor, the median of the rounds' ratios (or differences, for
// latency), each round pairing values measured next to each other.
func printSideTable(w io.Writer, o sideOptions, modes []sideMode, vals samples) {
	med := func(mode, side, metric string) (float64, bool) {
		v := vals[sideKey{mode, side, metric}]
		return median(v), len(v) > 0
	}
	paired := func(mode, metric string, f func(s, fl float64) float64) float64 {
		return vals.paired(mode, metric, sideSampled, sideFloor, f)
	}
	cell := func(mode, side, metric, format string) string {
		v, ok := med(mode, side, metric)
		if !ok {
			return "—"
		}
		return fmt.Sprintf(format, v)
	}

	fmt.Fprintf(w, "\nmedians of %d rounds; sampled/floor is the median of the rounds' ratios (differences for latency)\n", o.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\tside\tc=1 p50\tc=1 p99\tc=%d req/s\tCPU/request\tfake CPU/req\tclient CPU/req\t\n", o.c)
	for _, m := range modes {
		for _, side := range []string{sideDirect, sideFloor, sideSampled} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.name, side,
				cell(m.name, side, mP50, "%.0fµs"), cell(m.name, side, mP99, "%.0fµs"),
				cell(m.name, side, mRPS, "%.0f"), cell(m.name, side, mCPU, "%.1fµs"),
				cell(m.name, side, mUpstreamCPU, "%.1fµs"), cell(m.name, side, mClientCPU, "%.1fµs"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%+.0fµs\t%+.0fµs\t×%.2f\t×%.2f\t×%.2f\t×%.2f\t\n", m.name, "sampled/floor",
			paired(m.name, mP50, diff), paired(m.name, mP99, diff),
			paired(m.name, mRPS, ratio), paired(m.name, mCPU, ratio),
			paired(m.name, mUpstreamCPU, ratio), paired(m.name, mClientCPU, ratio))
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nmemory: %d requests in flight on a %s upstream (a fresh process each)\n", o.inflight, o.delay)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "side\tin flight\tRSS\tpeak RSS (VmHWM)\t\n")
	for _, side := range []string{sideFloor, sideSampled} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", side, cell("", side, mInflight, "%.0f"),
			cell("", side, mRSS, "%.1f MB"), cell("", side, mHWM, "%.1f MB"))
	}
	fmt.Fprintf(tw, "%s\t\t×%.2f\t×%.2f\t\n", "sampled/floor", paired("", mRSS, ratio), paired("", mHWM, ratio))
	_ = tw.Flush()

	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	cpuPlain, rpsPlain, p50Plain := paired("plain", mCPU, ratio), paired("plain", mRPS, ratio), paired("plain", mP50, diff)
	cpuSchema := paired("schema", mCPU, ratio)
	hwm, _ := med("", sideSampled, mHWM)
	fmt.Fprintf(w, "\ntargets:\n")
	fmt.Fprintf(w, "  plain CPU/request <= 1.5× floor:  ×%.2f  %s\n", cpuPlain, met(cpuPlain <= 1.5))
	fmt.Fprintf(w, "  plain c=%d req/s >= 0.7× floor:  ×%.2f  %s\n", o.c, rpsPlain, met(rpsPlain >= 0.7))
	fmt.Fprintf(w, "  plain c=1 p50 <= floor + 35µs:    %+.0fµs  %s\n", p50Plain, met(p50Plain <= 35))
	fmt.Fprintf(w, "  schema CPU/request <= 2× floor:   ×%.2f  %s\n", cpuSchema, met(cpuSchema <= 2))
	fmt.Fprintf(w, "  sampled peak RSS <= 150 MB:       %.1f MB  %s\n", hwm, met(hwm <= 150))
}

// samples are the values each round measured, by mode, side and metric.
type samples map[sideKey][]float64

func (s samples) add(mode, side, metric string, v float64) {
	k := sideKey{mode, side, metric}
	s[k] = append(s[k], v)
}

// paired is the median over the rounds of f of side a's and side b's
// values of a metric, each round pairing values measured next to each
// other.
func (s samples) paired(mode, metric, a, b string, f func(a, b float64) float64) float64 {
	va, vb := s[sideKey{mode, a, metric}], s[sideKey{mode, b, metric}]
	var out []float64
	for i := range min(len(va), len(vb)) {
		out = append(out, f(va[i], vb[i]))
	}
	return median(out)
}

// ratio and diff compare a round's values of two sides: a ratio for
// rates and CPU, a difference for times.
func ratio(a, b float64) float64 { return a / b }
func diff(a, b float64) float64  { return a - b }

// inTurn is the two sides in round r's order: which goes first alternates.
func inTurn(r int, a, b string) []string {
	if r%2 == 1 {
		return []string{b, a}
	}
	return []string{a, b}
}

// median returns the median of v, 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// child is a server process of the measurement: this binary re-run with
// a sub-command.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	url   string
}

// startChild starts this binary with args and waits for its
// "listening URL" line.
func startChild(ctx context.Context, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	line, err := c.line()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: %w", args[0], err)
	}
	url, ok := strings.CutPrefix(line, "listening ")
	if !ok {
		c.stop()
		return nil, fmt.Errorf("%s: said %q", args[0], line)
	}
	c.url = url
	return c, nil
}

// startGateway starts the side's gateway in front of the upstream at
// base; with contract, the contract floor stands on sampled's side.
func startGateway(ctx context.Context, side, base string, contract bool) (*child, error) {
	switch {
	case side == sideSampled && contract:
		return startChild(ctx, subFloor, "-upstream", base, "-contract")
	case side == sideSampled:
		return startChild(ctx, subSampled, "-upstream", base)
	}
	return startChild(ctx, subFloor, "-upstream", base)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) line() (string, error) {
	if !c.out.Scan() {
		if err := c.out.Err(); err != nil {
			return "", err
		}
		return "", errors.New("exited")
	}
	return c.out.Text(), nil
}

// command sends one command line and waits for its answer.
func (c *child) command(cmd string) error {
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return err
	}
	answer, err := c.line()
	if err != nil {
		return err
	}
	if answer != "ok" {
		return fmt.Errorf("%s: %s", cmd, answer)
	}
	return nil
}

// stop closes the child's stdin, which makes it shut down, and waits for
// it to exit; after 15 s it is killed.
func (c *child) stop() {
	_ = c.stdin.Close()
	exited := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(exited)
	}()
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-exited
	}
}

// runSelf runs this binary with args (a sub-command first) to its end and
// decodes the JSON it prints into v. It returns the process's state, which
// holds its CPU times.
func runSelf(ctx context.Context, v any, args ...string) (*os.ProcessState, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", args[0], err)
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		return nil, fmt.Errorf("%s said %q: %w", args[0], out.String(), err)
	}
	return cmd.ProcessState, nil
}

// runClient runs the load client in its own process: concurrency c, n
// requests (n > 0) or for d (d > 0). Any failed request is an error.
func runClient(ctx context.Context, url string, body []byte, c, n int, d time.Duration) (loadResult, error) {
	var res loadResult
	ps, err := runSelf(ctx, &res, subClient, "-url", url, "-body", string(body), "-c", strconv.Itoa(c), "-n", strconv.Itoa(n), "-d", d.String())
	if err != nil {
		return res, err
	}
	res.cpu = ps.UserTime() + ps.SystemTime()
	if res.Failed > 0 {
		return res, fmt.Errorf("%d of %d requests failed, the first: %s", res.Failed, res.Failed+res.OK, res.FirstErr)
	}
	return res, nil
}

// clockTicks is USER_HZ, the unit of the times in /proc/PID/stat on Linux.
const clockTicks = 100

// procCPU returns the CPU time, user and system, that process pid and all
// its threads have used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime, fields 14 and 15, of a
// /proc/PID/stat line. The command name, field 2, is in parentheses and
// may hold spaces and parentheses itself.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command name", b)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("stat %q: too few fields", b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: %w", err)
		}
		ticks += t
	}
	return time.Duration(ticks) * (time.Second / clockTicks), nil
}

// procMem returns the resident memory of process pid and its peak, in
// bytes.
func procMem(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatusMem(b)
}

// parseStatusMem reads VmRSS and VmHWM of a /proc/PID/status file.
func parseStatusMem(b []byte) (rss, hwm int64, err error) {
	found := 0
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("status %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("status: no VmRSS and VmHWM")
	}
	return rss, hwm, nil
}
