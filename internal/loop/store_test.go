package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
)

// failingStore is a memory store whose Append fails, as a store that
// retried a Redis that never answered does, for the events named fail from
// the nth on.
type failingStore struct {
	*memory.Store
	fail  string
	nth   int32
	seen  atomic.Int32
	fails atomic.Int32
}

func (s *failingStore) Append(ctx context.Context, id, name string, data json.RawMessage) (runs.Event, error) {
	if name == s.fail && s.seen.Add(1) >= s.nth {
		s.fails.Add(1)
		return runs.Event{}, errors.New("runs: append: dial unix /run/redis.sock: connect: no such file or directory")
	}
	return s.Store.Append(ctx, id, name, data)
}

// TestStoreFailureEndsLoop: a loop one of whose events the store could not
// record stops and ends failed, saying so, rather than go on with a gap in
// its log; and whatever it came to (here, an answer), its status is
// failed.
func TestStoreFailureEndsLoop(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	tests := []struct {
		fail string
		nth  int32
	}{
		{loop.EventToolStarted, 1},
		{loop.EventIterationCompleted, 1},
		{loop.EventIterationCompleted, 2}, // of the answer: the loop would complete
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.fail, tt.nth), func(t *testing.T) {
			store := &failingStore{Store: memory.New(memory.Options{}), fail: tt.fail, nth: tt.nth}
			e, _ := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg, Store: store})
			id := start(t, e, loop.Spec{Messages: prompt("Please calculate 2 * (3 + 4)")})
			evs := collect(t, store.Store, id)
			end := last(evs)
			if end.Status != loop.StatusFailed || end.Error != "the run store failed: an event could not be recorded" || end.Success {
				t.Errorf("loop.completed = %s, want status failed naming the run store", evs[len(evs)-1].Raw)
			}
			if got := snapshot(t, store.Store, id); got.Status != loop.StatusFailed {
				t.Errorf("snapshot status = %q, want failed", got.Status)
			}
			if n := store.fails.Load(); n != 1 {
				t.Errorf("%d failed appends, want 1: the loop stopped at the first", n)
			}
			// After the lost event, nothing but the end.
			for _, ev := range evs {
				if ev.Name == loop.EventModelCompleted && ev.Data.Iteration > int(tt.nth) {
					t.Errorf("the loop went on to iteration %d after its store failed: %v", ev.Data.Iteration, eventNames(evs))
				}
			}
		})
	}
}

// TestAbandoned: the end of a run whose replica died is a failed
// loop.completed with the reason, and a final snapshot that keeps what
// the run had done; a snapshot that cannot be read still gives a failed
// end.
func TestAbandoned(t *testing.T) {
	created := time.Now().Add(-time.Minute).UTC()
	running := loop.Snapshot{ID: "loop_1", TraceID: "tr", Status: loop.StatusRunning, Model: "offline/default", Tools: []string{"std__calculate"},
		MaxIterations: 10, TimeoutMs: 300000, Iterations: 2, Messages: prompt("hi"), Usage: sampler.Usage{InputTokens: 3, OutputTokens: 4},
		CreatedAt: created}
	b, _ := json.Marshal(running)
	const reason = "replica running this loop stopped (lease expired)"
	name, data, final := loop.Abandoned("loop_1", b, reason)
	if name != loop.EventLoopCompleted {
		t.Errorf("name = %q, want %q", name, loop.EventLoopCompleted)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	wantEv := map[string]any{"traceId": "tr", "status": "failed", "totalIterations": 2.0, "success": false, "result": "",
		"error": reason, "usage": map[string]any{"inputTokens": 3.0, "outputTokens": 4.0, "costUsd": 0.0}}
	if diff := cmp.Diff(wantEv, ev, cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "durationMs" })); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if ms, _ := ev["durationMs"].(float64); ms < 60000 {
		t.Errorf("durationMs = %v, want the time since the run was created", ev["durationMs"])
	}
	var got loop.Snapshot
	if err := json.Unmarshal(final, &got); err != nil {
		t.Fatal(err)
	}
	if got.FinishedAt == nil {
		t.Fatal("the final snapshot has no finishedAt")
	}
	want := running
	want.Status, want.Error, want.FinishedAt = loop.StatusFailed, reason, got.FinishedAt
	if diff := cmp.Diff(asJSON(t, want), asJSON(t, final)); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}

	_, _, final = loop.Abandoned("loop_2", nil, reason)
	got = loop.Snapshot{}
	if err := json.Unmarshal(final, &got); err != nil || got.ID != "loop_2" || got.Status != loop.StatusFailed || got.Error != reason {
		t.Errorf("snapshot of an unreadable run = %s, %v", final, err)
	}
}

// asJSON decodes v, or the JSON text v is, into generic values.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
