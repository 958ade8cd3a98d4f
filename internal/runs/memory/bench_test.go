package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/runs"
)

// BenchmarkFanout1000 publishes events to a run with 1000 subscribers, each
// in its own goroutine, and reports the publish→receive latency of the
// deliveries (p50, p99, max; a sample of at most 2000 events per subscriber)
// besides ns and allocations per published event.
//
// The publisher waits for every subscriber at the end of each window of
// events, so nobody falls Buffer behind: with window=1 each event reaches all
// subscribers before the next is published (latency without queueing); with
// window=64 the latencies include the queueing a burst of 64 events causes
// and ns/op approaches the fan-out throughput.
func BenchmarkFanout1000(b *testing.B) {
	for _, window := range []int{1, 64} {
		b.Run("window="+strconv.Itoa(window), func(b *testing.B) {
			benchmarkFanout(b, 1000, window)
		})
	}
}

func benchmarkFanout(b *testing.B, subscribers, window int) {
	const maxSamples = 2000 // per subscriber
	ctx := context.Background()
	m := New(Options{})
	if err := m.Create(ctx, "r", nil); err != nil {
		b.Fatal(err)
	}
	base := time.Now()
	stride := b.N/maxSamples + 1 // sample every stride-th event

	var barrier sync.WaitGroup // the subscribers that got the window's last event
	var done sync.WaitGroup
	samples := make([][]time.Duration, subscribers)
	errs := make([]error, subscribers)
	for i := range subscribers {
		sub, err := m.Subscribe(ctx, "r", 0)
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, maxSamples+1)
		done.Go(func() {
			defer sub.Close()
			n := 0
			for ev := range sub.Events() {
				if ev.Name == "tool.completed" || ev.Name == "barrier" {
					if n%stride == 0 {
						lat = append(lat, time.Since(base)-time.Duration(parseInt(ev.Data)))
					}
					n++
				}
				if ev.Name == "barrier" || ev.Name == "warmup" {
					barrier.Done()
				}
			}
			samples[i] = lat
			errs[i] = sub.Err()
		})
	}
	// Every subscriber goroutine runs and waits on its channel.
	barrier.Add(subscribers)
	if _, err := m.Append(ctx, "r", "warmup", nil); err != nil {
		b.Fatal(err)
	}
	barrier.Wait()

	buf := make([]byte, 0, 32)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		name := "tool.completed"
		last := i%window == 0 || i == b.N
		if last {
			name = "barrier"
			barrier.Add(subscribers)
		}
		buf = strconv.AppendInt(buf[:0], int64(time.Since(base)), 10)
		if _, err := m.Append(ctx, "r", name, buf); err != nil {
			b.Fatal(err)
		}
		if last {
			barrier.Wait()
		}
	}
	b.StopTimer()

	if _, err := m.Finish(ctx, "r", "loop.completed", []byte("0"), nil); err != nil {
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
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(pct(1), "max-µs")
}

// parseInt parses a non-negative decimal without allocating.
func parseInt(b []byte) int64 {
	var n int64
	for _, c := range b {
		n = n*10 + int64(c-'0')
	}
	return n
}

// BenchmarkList lists the first page of 10,000 kept runs, each with a
// summary and a snapshot of the given size: the cost of a page does not
// depend on the snapshots' sizes. "filtered" keeps 1 run in 100, as a key
// among many sees its own runs only.
func BenchmarkList(b *testing.B) {
	const kept = 10000
	for _, size := range []int{1 << 10, 16 << 10} {
		m := New(Options{Summarize: func(json.RawMessage) json.RawMessage { return json.RawMessage(`{"status":"completed"}`) }})
		snap := json.RawMessage(`{"pad":"` + strings.Repeat("x", size) + `"}`)
		for i := range kept {
			if err := m.Create(context.Background(), "run"+strconv.Itoa(i), snap); err != nil {
				b.Fatal(err)
			}
		}
		for _, filter := range []string{"all", "filtered"} {
			b.Run(fmt.Sprintf("snapshot=%dKiB/%s", size>>10, filter), func(b *testing.B) {
				var match func(json.RawMessage) bool
				if filter == "filtered" {
					n := 0
					match = func(json.RawMessage) bool { n++; return n%100 == 0 }
				}
				b.ReportAllocs()
				for b.Loop() {
					page, err := m.List(context.Background(), runs.ListQuery{Match: match})
					if err != nil || len(page.Runs) != runs.DefaultListLimit {
						b.Fatalf("List: %d runs, %v", len(page.Runs), err)
					}
				}
			})
		}
	}
}
