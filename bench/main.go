// Command bench measures what sampled adds to an upstream call, beside
// the least Go gateway that does the same work (the floor): each program
// in its own process, a zero-latency fake OpenAI upstream in another, the
// load client in a third.
//
// With -side it measures over -rounds alternating rounds: latency at
// concurrency 1 (the sides' requests interleaved one by one, see
// interleave.go), throughput and CPU per request at concurrency -c for -d,
// and resident memory with -inflight requests held by a slow upstream; it
// prints the medians and the targets against the floor (side.go).
//
// With -stream it measures sampled's streamed chat completions
// (/openai/v1/chat/completions) beside a floor that passes the upstream's
// event stream through: the time to the first event and the gaps between
// events at concurrency 1, CPU per chunk at -c, memory with -streams
// streams open, and CPU per non-streamed completion (stream.go).
//
// With -fanout N it measures SSE fan-out instead: N subscribers, in a
// separate process, follow one run while -events events are published
// every -interval; it reports the delivery latency from publish to each
// client and the service's heap. -floor serves the same bytes over bare TCP
// instead, to show what the machine itself allows.
//
// With -soak D it runs mixed traffic against the built sampled for D and
// fails if anything grew after the warm-up or any request or event was
// lost (soak.go).
//
// Usage:
//
//	go run ./bench -side [-rounds 3] [-n 5000] [-c 64] [-d 10s] [-inflight 1000] [-upstream-delay 2s] [-cpuprofile f]
//	go run ./bench -stream [-rounds 3] [-chunks 256] [-gap 2ms] [-seq 20] [-c 64] [-d 10s] [-streams 1000] [-hold 1s] [-cpuprofile f]
//	go run ./bench -fanout 1000 [-events 50] [-interval 20ms] [-floor] [-cpuprofile f]
//	go run ./bench -soak 1h [-rate 500]
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
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
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	side := fs.Bool("side", false, "measure sampled side by side with the floor gateway, each in its own process")
	tracing := fs.Bool("trace", false, "measure sampled with tracing on (exporting to a local OTLP receiver) beside tracing off")
	traceFloor := fs.Bool("trace-floor", false, "with -trace, measure the floor gateway instead, tracing as sampled does by the least code")
	contract := fs.Bool("contract", false, "with -side, measure the contract floor in sampled's place: the floor gateway doing sampled's contract by the least code")
	n := fs.Int("n", 5000, "requests to each side per c=1 latency measurement, the sides' requests interleaved")
	c := fs.Int("c", 64, "concurrency of the throughput measurement")
	d := fs.Duration("d", 10*time.Second, "duration of the throughput measurement")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the fan-out phase to this file; "+
		"with -side, of each gateway in an extra throughput phase per mode, to this name with -floor-plain etc. inserted; "+
		"with -stream, of each gateway in an extra streamed and non-streamed phase, with -floor-stream, -sampled-chat etc. inserted")
	rounds := fs.Int("rounds", 3, "alternating rounds of the side-by-side measurement")
	inflight := fs.Int("inflight", 1000, "requests held in flight for the side-by-side memory measurement")
	upstreamDelay := fs.Duration("upstream-delay", 2*time.Second, "how long the upstream holds them")
	stream := fs.Bool("stream", false, "measure sampled's streamed chat completions side by side with a floor that streams")
	chunks := fs.Int("chunks", 256, "chunks of each streamed answer in the streaming measurement")
	gap := fs.Duration("gap", 2*time.Millisecond, "time between the chunks of a streamed answer")
	seq := fs.Int("seq", 20, "streams to each side per c=1 measurement of the streaming measurement, interleaved")
	streams := fs.Int("streams", 1000, "streams held open for the streaming measurement's memory phase")
	hold := fs.Duration("hold", time.Second, "time between chunks in the memory phase, which keeps the streams open")
	fanout := fs.Int("fanout", 0, "measure SSE fan-out to this many subscribers instead")
	events := fs.Int("events", 50, "events published in the fan-out measurement")
	interval := fs.Duration("interval", 20*time.Millisecond, "time between events in the fan-out measurement")
	floorOnly := fs.Bool("floor", false, "fan-out over bare TCP instead of sampled")
	soakFor := fs.Duration("soak", 0, "run mixed traffic against the built sampled for this long instead, and fail on growth or loss")
	rate := fs.Float64("rate", 500, "operations started per second in the soak (500 use about a core of this 2-core machine)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch {
	case *soakFor > 0:
		if *rate <= 0 {
			return errors.New("-soak needs a positive -rate")
		}
		return runSoak(ctx, soakOptions{d: *soakFor, rate: *rate}, stdout)
	case *fanout > 0:
		return withCPUProfile(*cpuprofile, func() error {
			return runFanout(ctx, fanoutOptions{subscribers: *fanout, events: *events, interval: *interval, floor: *floorOnly}, stdout)
		})
	case *stream:
		if *rounds < 1 || *chunks < 1 || *gap <= 0 || *seq < 1 || *c < 1 || *d <= 0 || *streams < 1 || *hold <= 0 {
			return errors.New("-stream needs -rounds, -chunks, -gap, -seq, -c, -d, -streams and -hold positive")
		}
		return runStream(ctx, streamOptions{rounds: *rounds, chunks: *chunks, gap: *gap, seq: *seq, c: *c, d: *d,
			streams: *streams, hold: *hold, cpuprofile: *cpuprofile}, stdout)
	case *tracing:
		if *rounds < 1 || *n < 1 || *c < 1 || *d <= 0 {
			return errors.New("-trace needs -rounds, -n, -c and -d positive")
		}
		return runTrace(ctx, sideOptions{rounds: *rounds, n: *n, c: *c, d: *d, cpuprofile: *cpuprofile, floor: *traceFloor}, stdout)
	case *side:
		if *rounds < 1 || *n < 1 || *c < 1 || *d <= 0 || *inflight < 1 {
			return errors.New("-side needs -rounds, -n, -c, -d and -inflight positive")
		}
		return runSide(ctx, sideOptions{rounds: *rounds, n: *n, c: *c, d: *d, inflight: *inflight,
			delay: *upstreamDelay, cpuprofile: *cpuprofile, contract: *contract}, stdout)
	default:
		return errors.New("give -side, -trace, -stream, -fanout N or -soak DURATION")
	}
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
