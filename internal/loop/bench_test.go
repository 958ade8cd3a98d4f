package loop_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// timedTools measures the time spent inside the wrapped ToolSource's Call.
type timedTools struct {
	loop.ToolSource
	ns atomic.Int64
}

func (t *timedTools) Call(ctx context.Context, name string, args json.RawMessage) (*tools.Result, error) {
	start := time.Now()
	res, err := t.ToolSource.Call(ctx, name, args)
	t.ns.Add(int64(time.Since(start)))
	return res, err
}

// timedSampler measures the time spent inside the wrapped Sampler.
type timedSampler struct {
	loop.Sampler
	ns atomic.Int64
}

func (s *timedSampler) Sample(ctx context.Context, p *sampler.Params) (*sampler.Result, error) {
	start := time.Now()
	res, err := s.Sampler.Sample(ctx, p)
	s.ns.Add(int64(time.Since(start)))
	return res, err
}

// BenchmarkIteration measures the loop engine per iteration: loops of two
// iterations each (the offline model calls std__calculate, then answers),
// run one after the other and followed to their terminal event. Besides
// ns/iteration it reports the time spent in the tool call and in the model
// call, and what remains without them:
//
//   - overhead-ns/iteration: everything but the tool (model call, engine,
//     event log);
//   - engine-ns/iteration: everything but the tool and the model call.
func BenchmarkIteration(b *testing.B) {
	reg := newRegistry(b, false, nil)
	tt := &timedTools{ToolSource: reg}
	ts := &timedSampler{Sampler: offlineSampler(b)}
	e, store := newEngine(b, loop.Options{Sampler: ts, Tools: tt})
	spec := loop.Spec{Messages: prompt("calculate 2 * (3 + 4)")}

	iterations := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		id, err := e.Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		sub, err := store.Subscribe(context.Background(), id, 0)
		if err != nil {
			b.Fatal(err)
		}
		var end runs.Event
		for ev := range sub.Events() {
			end = ev
		}
		sub.Close()
		if end.Name != loop.EventLoopCompleted {
			b.Fatalf("the log of %s ends with %q", id, end.Name)
		}
		done := decodeEvent(b, end)
		if done.Name != loop.EventLoopCompleted || done.Data.Status != loop.StatusCompleted || done.Data.TotalIterations != 2 {
			b.Fatalf("loop ended with %s", done.Raw)
		}
		iterations += done.Data.TotalIterations
	}
	elapsed := time.Since(start)
	b.StopTimer()

	n := float64(iterations)
	tool, model := float64(tt.ns.Load()), float64(ts.ns.Load())
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/iteration")
	b.ReportMetric(tool/n, "tool-ns/iteration")
	b.ReportMetric(model/n, "model-ns/iteration")
	b.ReportMetric((float64(elapsed.Nanoseconds())-tool)/n, "overhead-ns/iteration")
	b.ReportMetric((float64(elapsed.Nanoseconds())-tool-model)/n, "engine-ns/iteration")
}
