package redis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
// events appended through the first. Each event reaches every subscriber
// before the next is appended.
func BenchmarkFanout1000(b *testing.B) {
	const subscribers, maxSamples = 1000, 500
	ctx := context.Background()
	for _, be := range backends {
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
