// Command sampled-bench measures what sampled adds to an upstream call. It
// starts a zero-latency fake OpenAI upstream and sampled (configured for
// it) on loopback, then measures in one run:
//
//   - latency straight to the fake and through sampled at concurrency 1
//     (p50, p99 and their difference: sampled's overhead);
//   - requests per second through sampled at concurrency -c for -d.
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
	"slices"
	"sync"
	"sync/atomic"
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

// completion is a chat.completion reply in OpenAI's documented shape.
const completion = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":14,"completion_tokens":8,"total_tokens":22}}`

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 1 && args[1] == "-fanout-client" {
		return fanoutClientMain(args[1:], stdout)
	}
	fs := flag.NewFlagSet("sampled-bench", flag.ContinueOnError)
	n := fs.Int("n", 5000, "requests per latency measurement (concurrency 1)")
	c := fs.Int("c", 64, "concurrency of the throughput measurement")
	d := fs.Duration("d", 10*time.Second, "duration of the throughput measurement")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the throughput or fan-out phase to this file")
	fanout := fs.Int("fanout", 0, "measure SSE fan-out to this many subscribers instead")
	events := fs.Int("events", 50, "events published in the fan-out measurement")
	interval := fs.Duration("interval", 20*time.Millisecond, "time between events in the fan-out measurement")
	floorOnly := fs.Bool("floor", false, "fan-out over bare TCP instead of sampled")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *fanout > 0 {
		return withCPUProfile(*cpuprofile, func() error {
			return runFanout(ctx, fanoutOptions{subscribers: *fanout, events: *events, interval: *interval, floor: *floorOnly}, stdout)
		})
	}

	fake := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion)
	})}
	fakeURL, stopFake, err := serve(fake)
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

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	upstreamBody := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of France?"}],"max_completion_tokens":100}`)
	sampleBody := []byte(`{"prompt":"What is the capital of France?","maxTokens":100}`)
	direct := func() error { return post(client, fakeURL+"/v1/chat/completions", upstreamBody) }
	through := func() error { return post(client, sampledURL+"/v1/sample", sampleBody) }

	// Warm up connections and caches.
	for range 200 {
		if err := direct(); err != nil {
			return fmt.Errorf("fake upstream: %w", err)
		}
		if err := through(); err != nil {
			return fmt.Errorf("sampled: %w", err)
		}
	}
	fmt.Fprintf(stdout, "latency at concurrency 1, %d requests each\n", *n)
	dl, err := latencies(ctx, *n, direct)
	if err != nil {
		return err
	}
	tl, err := latencies(ctx, *n, through)
	if err != nil {
		return err
	}
	p := func(l []time.Duration, q float64) time.Duration { return l[int(q*float64(len(l)-1))] }
	fmt.Fprintf(stdout, "  straight to the fake:  p50 %8s  p99 %8s\n", p(dl, .50), p(dl, .99))
	fmt.Fprintf(stdout, "  through sampled:       p50 %8s  p99 %8s\n", p(tl, .50), p(tl, .99))
	fmt.Fprintf(stdout, "  added by sampled:      p50 %8s  p99 %8s   (targets: p50 <= 300µs, p99 <= 1ms)\n",
		p(tl, .50)-p(dl, .50), p(tl, .99)-p(dl, .99))

	return withCPUProfile(*cpuprofile, func() error {
		count, failed, elapsed := throughput(ctx, *c, *d, through)
		fmt.Fprintf(stdout, "throughput through sampled at concurrency %d for %s\n", *c, *d)
		fmt.Fprintf(stdout, "  %d requests, %d failed, %.0f requests/s   (target: >= 5000/s)\n",
			count, failed, float64(count)/elapsed.Seconds())
		if failed > 0 {
			return fmt.Errorf("%d requests failed", failed)
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

// latencies runs fn n times in sequence and returns the sorted durations.
func latencies(ctx context.Context, n int, fn func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	if len(out) == 0 {
		return nil, errors.New("no requests")
	}
	slices.Sort(out)
	return out, nil
}

// throughput runs fn from c goroutines for d and counts the requests.
func throughput(ctx context.Context, c int, d time.Duration, fn func() error) (ok, failed int64, elapsed time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var okN, failN atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if fn() != nil {
					failN.Add(1)
				} else {
					okN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return okN.Load(), failN.Load(), time.Since(start)
}
