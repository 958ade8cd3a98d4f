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
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
)

// fanoutOptions configure the SSE fan-out measurement.
type fanoutOptions struct {
	subscribers int
	events      int
	interval    time.Duration
	floor       bool // bare TCP instead of sampled, same bytes and client
}

// fanoutResult is what the client process reports, in nanoseconds.
type fanoutResult struct {
	Events  int      `json:"events"`
	Read    [3]int64 `json:"read"`    // p50, p99, max: publish → client read it
	Arrival [3]int64 `json:"arrival"` // p50, p99, max: publish → in the client's socket
	Last    [3]int64 `json:"last"`    // p50, p99, max over events: publish → its last arrival
	// p50, p99, max: publish of the terminal event → in the client's socket
	Terminal [3]int64 `json:"terminal"`
	CPU      int64    `json:"cpu"` // the client's CPU time while reading
}

// publisher is the side under measurement: sampled, or the bare TCP floor.
type publisher interface {
	url() string
	subscribers() int
	publish(i int, data []byte, last bool) error
	close()
}

// runFanout measures the delivery of events from one run to many SSE
// subscribers. The subscribers live in a separate process (this program,
// re-run with -fanout-client) so that the service's heap and CPU are its
// own. Events are published every interval, with the publish time in them;
// the client records when each reached its socket (the kernel's receive
// timestamp) and when it read it.
func runFanout(ctx context.Context, o fanoutOptions, stdout io.Writer) error {
	var (
		pub publisher
		err error
	)
	if o.floor {
		pub, err = startFloor()
	} else {
		pub, err = startService(ctx)
	}
	if err != nil {
		return err
	}
	defer pub.close()

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "-fanout-client", pub.url(),
		"-fanout", strconv.Itoa(o.subscribers), "-events", strconv.Itoa(o.events))
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	if err := waitSubscribers(pub, o.subscribers, exited); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := ms.HeapInuse
	goroutines := runtime.NumGoroutine()
	cpu0, err := cpuTime()
	if err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	gcs := ms.NumGC
	publishing, err := publishPaced(ctx, pub, o.events, o.interval)
	if err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	if err := <-exited; err != nil {
		return fmt.Errorf("client: %v", err)
	}
	cpu1, err := cpuTime()
	if err != nil {
		return err
	}
	runtime.ReadMemStats(&ms)
	var res fanoutResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return fmt.Errorf("client output %q: %v", out.String(), err)
	}
	what := "sampled"
	if o.floor {
		what = "bare TCP (floor)"
	}
	ms2 := func(ns int64) string { return fmt.Sprintf("%6.2fms", float64(ns)/1e6) }
	fmt.Fprintf(stdout, "SSE fan-out through %s: %d subscribers (separate process), %d events %s apart, %d deliveries\n",
		what, o.subscribers, o.events, o.interval, res.Events)
	fmt.Fprintf(stdout, "  heap in use with every subscriber connected: %.1f MiB, %d goroutines\n",
		float64(heap)/(1<<20), goroutines)
	fmt.Fprintf(stdout, "  publish -> in the client's socket:  p50 %s  p99 %s  max %s   (target: sampled p99 <= 1.25x the floor's)\n",
		ms2(res.Arrival[0]), ms2(res.Arrival[1]), ms2(res.Arrival[2]))
	fmt.Fprintf(stdout, "  publish -> read by the client:      p50 %s  p99 %s  max %s\n",
		ms2(res.Read[0]), ms2(res.Read[1]), ms2(res.Read[2]))
	fmt.Fprintf(stdout, "  publish -> an event's last arrival: p50 %s  p99 %s  max %s   (over %d events)\n",
		ms2(res.Last[0]), ms2(res.Last[1]), ms2(res.Last[2]), o.events)
	fmt.Fprintf(stdout, "  the terminal event in the socket:   p50 %s  p99 %s  max %s   (every stream ends with it)\n",
		ms2(res.Terminal[0]), ms2(res.Terminal[1]), ms2(res.Terminal[2]))
	us := func(ns int64) float64 { return float64(ns) / 1e3 / float64(max(res.Events, 1)) }
	fmt.Fprintf(stdout, "  publish call (hands the event to every subscriber): %.0fµs on average\n",
		float64(publishing.Microseconds())/float64(o.events))
	fmt.Fprintf(stdout, "  CPU per delivery: %.1fµs %s, %.1fµs client; %d GC cycles in %s while publishing\n",
		us(cpu1-cpu0), what, us(res.CPU), ms.NumGC-gcs, what)
	return nil
}

// waitSubscribers polls pub's own count until it has n subscribers. A
// value on ended (the client giving up) or a minute without them is an
// error.
func waitSubscribers(pub publisher, n int, ended <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for pub.subscribers() < n {
		select {
		case err := <-ended:
			return fmt.Errorf("client ended before subscribing: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d subscribers after a minute", pub.subscribers(), n)
		}
	}
	return nil
}

// publishPaced publishes events events, interval apart, each holding its
// publish time as {"t":<Unix ns>}; the last one is terminal. It returns the
// time the publish calls took in all.
func publishPaced(ctx context.Context, pub publisher, events int, interval time.Duration) (time.Duration, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var took time.Duration
	for i := range events {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return took, ctx.Err()
		}
		start := time.Now()
		data := []byte(`{"t":` + strconv.FormatInt(start.UnixNano(), 10) + `}`)
		if err := pub.publish(i, data, i == events-1); err != nil {
			return took, err
		}
		took += time.Since(start)
	}
	return took, nil
}

// service is sampled on the offline provider, with one run in its store
// whose event log the benchmark appends to.
type service struct {
	a    *app.App
	runs runs.Store
	reg  *prometheus.Registry
	addr string
	stop func()
}

const fanoutRun = "loop_fanout"

func startService(ctx context.Context) (*service, error) {
	reg, store := prometheus.NewRegistry(), memory.New(memory.Options{})
	a, err := app.New(ctx, app.Options{Registry: reg, Runs: store})
	if err != nil {
		return nil, err
	}
	if err := store.Create(ctx, fanoutRun, json.RawMessage(`{"status":"running"}`)); err != nil {
		a.Close()
		return nil, err
	}
	u, stop, err := serve(&http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second})
	if err != nil {
		a.Close()
		return nil, err
	}
	return &service{a: a, runs: store, reg: reg, addr: u, stop: stop}, nil
}

func (s *service) url() string { return s.addr + "/v1/loops/" + fanoutRun + "/events" }

// subscribers reads the gauge of open event streams.
func (s *service) subscribers() int {
	mfs, err := s.reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "sampled_sse_subscribers" && len(mf.GetMetric()) == 1 {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return 0
}

func (s *service) publish(_ int, data []byte, last bool) error {
	var err error
	if last {
		_, err = s.runs.Finish(context.Background(), fanoutRun, "bench", data, nil)
	} else {
		_, err = s.runs.Append(context.Background(), fanoutRun, "bench", data)
	}
	return err
}
func (s *service) close() { s.a.Close(); s.stop() }

// floor serves the same SSE bytes over bare TCP: a goroutine per connection
// and one write per event, with no HTTP server, no router, no event log. It
// shows what this machine's sockets allow, for comparison.
type floor struct {
	ln   net.Listener
	mu   sync.Mutex
	subs []chan []byte
}

func startFloor() (*floor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &floor{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serveConn(c)
		}
	}()
	return f, nil
}

func (f *floor) serveConn(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for { // the request head, up to its empty line
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if line == "\r\n" {
			break
		}
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		return
	}
	ch := make(chan []byte, 256)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	for frame := range ch {
		if _, err := c.Write(frame); err != nil {
			return
		}
	}
}

func (f *floor) url() string { return "http://" + f.ln.Addr().String() + "/events" }
func (f *floor) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}
func (f *floor) publish(i int, data []byte, last bool) error {
	ev := fmt.Sprintf("id: %d\nevent: bench\ndata: %s\n\n", i+1, data)
	frame := []byte(fmt.Sprintf("%x\r\n%s\r\n", len(ev), ev))
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		select {
		case ch <- frame:
		default:
			return errors.New("floor: a subscriber fell behind")
		}
		if last {
			close(ch)
		}
	}
	return nil
}
func (f *floor) close() { f.ln.Close() }

// fanoutClientMain is the client process of runFanout: it subscribes, reads
// every event and prints a fanoutResult as JSON.
func fanoutClientMain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench -fanout-client", flag.ContinueOnError)
	url := fs.String("fanout-client", "", "events URL")
	n := fs.Int("fanout", 1000, "subscribers")
	events := fs.Int("events", 50, "events per subscriber")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := subscribeAll(*url, *n, *events, 2*time.Minute)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}
