// Command sampled-bench measures what sampled adds to an upstream call. It
// starts a zero-latency fake OpenAI upstream and sampled (configured for
// it) on loopback, then measures in one run:
//
//   - latency straight to the fake and through sampled at concurrency 1
//     (p50, p99 and their difference: sampled's overhead);
//   - requests per second through sampled at concurrency -c for -d.
//
// With -side it measures sampled side by side with the least Go gateway
// that does the same work (the floor), each program in its own process and
// the load client in another: latency at concurrency 1 (the sides'
// requests interleaved one by one, see interleave.go), throughput and CPU
// per request at concurrency -c, and resident memory with -inflight
// requests held by a slow upstream, over -rounds alternating rounds (see
// side.go); with -pairs N, c=1 latency alone over N rounds, beside a
// second floor as the control (pairs.go). With -attribute it reads a CPU
// profile's stacks from `go tool pprof -traces` and sums them by what they
// do (attribute.go).
//
// With -fanout N it measures SSE fan-out instead: N subscribers, in a
// separate process, follow one run while -events events are published
// every -interval; it reports the delivery latency from publish to each
// client and the service's heap. -floor serves the same bytes over bare TCP
// instead, to show what the machine itself allows.
//
// Usage:
//
//	go run ./cmd/sampled-bench [-n 5000] [-c 64] [-d 10s] [-cpuprofile f]
//	go run ./cmd/sampled-bench -side [-rounds 3] [-n 5000] [-c 64] [-d 10s] [-inflight 1000] [-upstream-delay 2s] [-cpuprofile f]
//	go run ./cmd/sampled-bench -side -pairs 12 [-n 3000]
//	go tool pprof -traces f-sampled-plain | go run ./cmd/sampled-bench -attribute [-cpu-per-request µs]
//	go run ./cmd/sampled-bench -fanout 1000 [-events 50] [-interval 20ms] [-floor]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"time"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sampled-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 1 && args[1] == "-fanout-client" {
		return fanoutClientMain(args[1:], stdout)
	}
	if len(args) > 1 && isSideChild(args[1]) {
		return sideChild(ctx, args[1:], os.Stdin, stdout)
	}
	fs := flag.NewFlagSet("sampled-bench", flag.ContinueOnError)
	n := fs.Int("n", 5000, "requests per latency measurement at concurrency 1 (with -side: to each side, the sides' requests interleaved)")
	c := fs.Int("c", 64, "concurrency of the throughput measurement")
	d := fs.Duration("d", 10*time.Second, "duration of the throughput measurement")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the throughput or fan-out phase to this file; "+
		"with -side, of each gateway in an extra throughput phase per mode, to this name with -floor-plain etc. inserted")
	side := fs.Bool("side", false, "measure sampled side by side with the floor gateway, each in its own process")
	rounds := fs.Int("rounds", 3, "alternating rounds of the side-by-side measurement")
	pairs := fs.Int("pairs", 0, "with -side: measure only c=1 latency in plain mode, in this many rounds of interleaved requests, beside a second floor as the control")
	inflight := fs.Int("inflight", 1000, "requests held in flight for the side-by-side memory measurement")
	upstreamDelay := fs.Duration("upstream-delay", 2*time.Second, "how long the upstream holds them")
	attributeIn := fs.Bool("attribute", false, "read `go tool pprof -traces` output on stdin and attribute its samples to the buckets of the side-by-side analysis")
	perRequest := fs.Float64("cpu-per-request", 0, "with -attribute: the µs of CPU per request measured while profiling, to show each bucket in µs")
	fanout := fs.Int("fanout", 0, "measure SSE fan-out to this many subscribers instead")
	events := fs.Int("events", 50, "events published in the fan-out measurement")
	interval := fs.Duration("interval", 20*time.Millisecond, "time between events in the fan-out measurement")
	floorOnly := fs.Bool("floor", false, "fan-out over bare TCP instead of sampled")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *attributeIn {
		return runAttribute(os.Stdin, *perRequest, stdout)
	}
	if *side && *pairs > 0 {
		if *n < 1 {
			return errors.New("-pairs needs -n positive")
		}
		return runPairs(ctx, pairsOptions{pairs: *pairs, n: *n}, stdout)
	}
	if *side {
		if *rounds < 1 || *n < 1 || *c < 1 || *d <= 0 || *inflight < 1 {
			return errors.New("-side needs -rounds, -n, -c, -d and -inflight positive")
		}
		return runSide(ctx, sideOptions{rounds: *rounds, n: *n, c: *c, d: *d, inflight: *inflight,
			delay: *upstreamDelay, cpuprofile: *cpuprofile}, stdout)
	}
	if *fanout > 0 {
		return withCPUProfile(*cpuprofile, func() error {
			return runFanout(ctx, fanoutOptions{subscribers: *fanout, events: *events, interval: *interval, floor: *floorOnly}, stdout)
		})
	}

	fakeURL, stopFake, err := serve(&http.Server{Handler: newFakeUpstream(0), ReadHeaderTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer stopFake()

	env := map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": fakeURL + "/v1", "SAMPLING_MODEL": "gpt-4o-mini"}
	cfg, err := config.Load(func(k string) string { return env[k] }, nil)
	if err != nil {
		return err
	}
	a, err := app.New(ctx, app.Options{Config: cfg})
	if err != nil {
		return err
	}
	defer a.Close()
	sampledURL, stopSampled, err := serve(&http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer stopSampled()

	modes, err := sideModes()
	if err != nil {
		return err
	}
	plain := modes[0]
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	direct := func() error { return post(client, fakeURL+"/v1/chat/completions", plain.direct) }
	through := func() error { return post(client, sampledURL+"/v1/sample", plain.body) }

	// Warm up connections and caches.
	for range 200 {
		if err := direct(); err != nil {
			return fmt.Errorf("fake upstream: %w", err)
		}
		if err := through(); err != nil {
			return fmt.Errorf("sampled: %w", err)
		}
	}
	fmt.Fprintf(stdout, "latency at concurrency 1, %d requests each (client in this process)\n", *n)
	dl := load(ctx, 1, *n, 0, direct)
	tl := load(ctx, 1, *n, 0, through)
	for _, r := range []loadResult{dl, tl} {
		if r.Failed > 0 || r.OK == 0 {
			return fmt.Errorf("%d of %d requests failed, the first: %s", r.Failed, r.Failed+r.OK, r.FirstErr)
		}
	}
	us := func(ns int64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }
	fmt.Fprintf(stdout, "  straight to the fake:  p50 %8s  p99 %8s\n", us(dl.P50Ns), us(dl.P99Ns))
	fmt.Fprintf(stdout, "  through sampled:       p50 %8s  p99 %8s\n", us(tl.P50Ns), us(tl.P99Ns))
	fmt.Fprintf(stdout, "  added by sampled:      p50 %8s  p99 %8s   (targets: p50 <= 300µs, p99 <= 1ms)\n",
		us(tl.P50Ns-dl.P50Ns), us(tl.P99Ns-dl.P99Ns))

	return withCPUProfile(*cpuprofile, func() error {
		r := load(ctx, *c, 0, *d, through)
		fmt.Fprintf(stdout, "throughput through sampled at concurrency %d for %s\n", *c, *d)
		fmt.Fprintf(stdout, "  %d requests, %d failed, %.0f requests/s   (target: >= 5000/s)\n", r.OK, r.Failed, r.perSecond())
		if r.Failed > 0 {
			return fmt.Errorf("%d requests failed, the first: %s", r.Failed, r.FirstErr)
		}
		return nil
	})
}

// withCPUProfile runs fn, writing a CPU profile of it to path if path is
// not empty.
func withCPUProfile(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	return fn()
}

// serve starts srv on a loopback port.
func serve(srv *http.Server) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

func post(c *http.Client, url string, body []byte) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
