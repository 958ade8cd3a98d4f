package loop_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/mcptest"
)

// TestRun runs the offline model's calculation and waits for it: Run
// returns the final snapshot, the one the store holds, after telling each
// iteration.
func TestRun(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	e, store := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg})
	var iterations []int
	snap, err := e.Run(context.Background(), loop.Spec{Messages: prompt("Please calculate 2 * (3 + 4)")},
		func(it int) { iterations = append(iterations, it) })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if snap.Status != loop.StatusCompleted || snap.Iterations != 2 || !strings.Contains(snap.Result, "14") || snap.FinishedAt == nil {
		t.Errorf("snapshot = %+v, want completed after 2 iterations with 14", snap)
	}
	if diff := cmp.Diff([]int{1, 2}, iterations); diff != "" {
		t.Errorf("iterations told (-want +got):\n%s", diff)
	}
	stored := snapshot(t, store, snap.ID)
	if stored.Status != snap.Status || stored.Result != snap.Result {
		t.Errorf("stored snapshot %+v differs from Run's %+v", stored, snap)
	}
}

// TestRunRefused: a spec the engine refuses is Run's error, and no run
// starts.
func TestRunRefused(t *testing.T) {
	t.Parallel()
	e, _ := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: newRegistry(t, false, nil)})
	_, err := e.Run(context.Background(), loop.Spec{}, nil)
	if !errors.Is(err, sampler.ErrInvalid) {
		t.Errorf("Run without messages = %v, want an invalid-request error", err)
	}
	e.Close()
	if _, err := e.Run(context.Background(), loop.Spec{Messages: prompt("hi")}, nil); !errors.Is(err, loop.ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
}

// TestRunContextEnds ends Run's context while the loop's tool runs: the
// loop is cancelled, the server sees the call cancelled, and Run returns
// the cancelled snapshot.
func TestRunContextEnds(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, true, nil)
	marker := filepath.Join(t.TempDir(), "marker")
	f := newFakeOpenAI(t, sequence(
		reply{body: toolCallsReply(call{"call_1", "test__slow", map[string]any{"ms": 60000, "marker": marker}})},
		reply{body: textReply("too late")}))
	e, _ := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: reg})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type ran struct {
		snap *loop.Snapshot
		err  error
	}
	done := make(chan ran, 1)
	go func() {
		snap, err := e.Run(ctx, loop.Spec{Messages: prompt("Take your time.")}, nil)
		done <- ran{snap, err}
	}()
	mcptest.PollFile(t, marker, "started", waitTimeout)
	cancel()
	got := <-done
	if got.err != nil {
		t.Fatalf("Run: %v", got.err)
	}
	if got.snap.Status != loop.StatusCancelled {
		t.Errorf("status = %q, want cancelled", got.snap.Status)
	}
	mcptest.PollFile(t, marker, "cancelled", waitTimeout)
}
