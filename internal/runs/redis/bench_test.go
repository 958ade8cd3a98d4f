package redis

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
)

// percentiles reports p50, p99 and max of d in µs.
func percentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	pct := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(pct(1), "max-µs")
}

// backend makes the stores of one benchmark: one memory store, or n Redis
// stores ("replicas", each with its own client) sharing the test server.
type backend struct {
	name string
	make func(b *testing.B, n int) []runs.Store
}

var backends = []backend{
	{"memory", func(b *testing.B, n int) []runs.Store {
		m := memory.New(memory.Options{})
		b.Cleanup(func() { _ = m.Close() })
		return []runs.Store{m}
	}},
	{"redis", func(b *testing.B, n int) []runs.Store {
		p := prefix()
		var out []runs.Store
		for range n {
			s := New(newClient(b), Options{Prefix: p})
			b.Cleanup(func() { _ = s.Close() })
			out = append(out, s)
		}
		return out
	}},
}

// BenchmarkAppend appends 200-byte events to one run, one at a time, and
// reports the latency of Append (p50, p99, max), on each backend; Redis is
// on a unix socket.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	data := []byte(`{"tool":"calc","result":"` + strings.Repeat("x", 172) + `"}`)
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.make(b, 1)[0]
			if err := s.Create(ctx, "r", nil); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := s.Append(ctx, "r", "tool.completed", data); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			percentiles(b, lat)
		})
	}
}

// BenchmarkFanout1000 appends events to a run that 1000 subscribers
// follow, and reports the append→receive latency of the deliveries (p50,
// p99, max; at most 500 samples per subscriber). memory: 1000 subscribers
// on one store; redis: 500 on each of two stores sharing one Redis, the
// events appended through the first; redis-floor: the same over a bare
// Redis stream (floorStream), the least a store on Redis Streams can take.
// Each event reaches every subscriber before the next is appended.
func BenchmarkFanout1000(b *testing.B) {
	const subscribers, maxSamples = 1000, 500
	ctx := context.Background()
	type fanoutBackend struct {
		name string
		make func(b *testing.B, n int) []fanoutStore
	}
	var bes []fanoutBackend
	for _, be := range backends {
		bes = append(bes, fanoutBackend{be.name, func(b *testing.B, n int) []fanoutStore {
			var out []fanoutStore
			for _, s := range be.make(b, n) {
				out = append(out, s)
			}
			return out
		}})
	}
	bes = append(bes, fanoutBackend{"redis-floor", newFloorStreams})
	for _, be := range bes {
		b.Run(be.name, func(b *testing.B) {
			stores := be.make(b, 2)
			if err := stores[0].Create(ctx, "r", nil); err != nil {
				b.Fatal(err)
			}
			base := time.Now()
			stride := b.N/maxSamples + 1
			var arrived, done sync.WaitGroup
			samples := make([][]time.Duration, subscribers)
			errs := make([]error, subscribers)
			for i := range subscribers {
				sub, err := stores[i%len(stores)].Subscribe(ctx, "r", 0)
				if err != nil {
					b.Fatal(err)
				}
				done.Go(func() {
					defer sub.Close()
					n := 0
					for ev := range sub.Events() {
						if ev.Name == "tool.completed" {
							if n%stride == 0 {
								samples[i] = append(samples[i], time.Since(base)-time.Duration(parseInt(ev.Data)))
							}
							n++
						}
						if ev.Name != "loop.completed" {
							arrived.Done()
						}
					}
					errs[i] = sub.Err()
				})
			}
			arrived.Add(subscribers)
			if _, err := stores[0].Append(ctx, "r", "warmup", nil); err != nil {
				b.Fatal(err)
			}
			arrived.Wait()
			buf := make([]byte, 0, 32)
			b.ResetTimer()
			for range b.N {
				arrived.Add(subscribers)
				buf = strconv.AppendInt(buf[:0], int64(time.Since(base)), 10)
				if _, err := stores[0].Append(ctx, "r", "tool.completed", buf); err != nil {
					b.Fatal(err)
				}
				arrived.Wait()
			}
			b.StopTimer()
			if _, err := stores[0].Finish(ctx, "r", "loop.completed", nil, nil); err != nil {
				b.Fatal(err)
			}
			done.Wait()
			var all []time.Duration
			for i := range subscribers {
				if errs[i] != nil {
					b.Fatalf("subscriber %d: %v", i, errs[i])
				}
				all = append(all, samples[i]...)
			}
			percentiles(b, all)
		})
	}
}

// fanoutStore is what BenchmarkFanout1000 uses of a store.
type fanoutStore interface {
	Create(ctx context.Context, id string, snapshot json.RawMessage) error
	Subscribe(ctx context.Context, id string, after int64) (runs.Subscription, error)
	Append(ctx context.Context, id, name string, data json.RawMessage) (runs.Event, error)
	Finish(ctx context.Context, id, name string, data, snapshot json.RawMessage) (runs.Event, error)
}

// floorStream is the least any store on Redis Streams does to deliver an
// event to the subscribers of two replicas, for BenchmarkFanout1000's
// "redis-floor": a plain XADD (no script, no run state), and per replica
// one blocking XREAD loop feeding a runs.Fanout. It keeps no guarantee of
// the Store's (no replay, no retry, no lease): it measures the transport.
type floorStream struct {
	c   *goredis.Client // appends
	key string
	n   *int64 // the last id appended; shared by the replicas of a test
	mu  sync.Mutex
	fan *runs.Fanout
}

// newFloorStreams returns n floorStreams ("replicas") on one stream, each
// with a client and a read loop of its own, stopped with the benchmark.
func newFloorStreams(b *testing.B, n int) []fanoutStore {
	key, last := prefix()+"floor", new(int64)
	var out []fanoutStore
	for range n {
		f := &floorStream{c: newClient(b), key: key, n: last}
		f.fan = runs.NewFanout(&f.mu)
		conn := newClient(b).Conn()
		var wg sync.WaitGroup
		wg.Go(func() { f.read(conn) })
		b.Cleanup(func() {
			_ = conn.Close() // ends a read still blocked
			wg.Wait()
		})
		out = append(out, f)
	}
	return out
}

// read delivers the stream's entries until the terminal one or an error.
func (f *floorStream) read(conn *goredis.Conn) {
	pos := "0-0"
	for {
		res, err := conn.XRead(context.Background(), &goredis.XReadArgs{Streams: []string{f.key, pos}, Count: readCount, Block: time.Minute}).Result()
		if err != nil {
			return
		}
		for _, m := range res[0].Messages {
			ev, terminal, err := parseEntry(m)
			if err != nil {
				return
			}
			pos = m.ID
			f.mu.Lock()
			f.fan.Deliver(ev, terminal)
			f.mu.Unlock()
			if terminal {
				return
			}
		}
	}
}

func (f *floorStream) Create(context.Context, string, json.RawMessage) error { return nil }

func (f *floorStream) Subscribe(ctx context.Context, _ string, after int64) (runs.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fan.Subscribe(ctx, after, nil, defaultBuffer), nil
}

func (f *floorStream) Append(ctx context.Context, _, name string, data json.RawMessage) (runs.Event, error) {
	return f.add(ctx, name, data, false)
}

func (f *floorStream) Finish(ctx context.Context, _, name string, data, _ json.RawMessage) (runs.Event, error) {
	return f.add(ctx, name, data, true)
}

// add appends one entry, in the Store's format, with the next id; one
// goroutine appends at a time.
func (f *floorStream) add(ctx context.Context, name string, data json.RawMessage, terminal bool) (runs.Event, error) {
	*f.n++
	vals := []any{"n", name}
	if data != nil {
		vals = append(vals, "d", string(data))
	}
	if terminal {
		vals = append(vals, "t", "1")
	}
	err := f.c.XAdd(ctx, &goredis.XAddArgs{Stream: f.key, ID: strconv.FormatInt(*f.n, 10) + "-0", Values: vals}).Err()
	return runs.Event{ID: *f.n, Name: name, Data: data}, err
}

// parseInt parses a non-negative decimal without allocating.
func parseInt(b []byte) int64 {
	var n int64
	for _, c := range b {
		n = n*10 + int64(c-'0')
	}
	return n
}

// BenchmarkRedisMemory measures what runs cost Redis: b.N runs of 100
// events of 200 bytes each, finished, and Redis's used_memory before and
// after, per run and per event (the run's hash and index entry included in
// the per-run figure, divided over its events in the per-event one).
func BenchmarkRedisMemory(b *testing.B) {
	const events = 100
	ctx := context.Background()
	s := New(newClient(b), Options{Prefix: prefix()})
	b.Cleanup(func() { _ = s.Close() })
	data := []byte(`{"tool":"calc","result":"` + strings.Repeat("x", 172) + `"}`)
	used := func() int64 {
		info, err := s.c.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
		b.Fatal("no used_memory in INFO memory")
		return 0
	}
	before := used()
	b.ResetTimer()
	for i := range b.N {
		id := "m" + strconv.Itoa(i)
		if err := s.Create(ctx, id, []byte(`{"status":"running"}`)); err != nil {
			b.Fatal(err)
		}
		for range events - 1 {
			if _, err := s.Append(ctx, id, "tool.completed", data); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.Finish(ctx, id, "loop.completed", data, []byte(`{"status":"completed"}`)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	delta := float64(used() - before)
	b.ReportMetric(delta/float64(b.N), "B/run")
	b.ReportMetric(delta/float64(b.N*events), "B/event")
}
