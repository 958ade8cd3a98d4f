package loop_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// TestOwner checks that a run's owner is in its snapshot, and absent from
// it when the spec names none.
func TestOwner(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	for _, owner := range []string{"ci", ""} {
		e, store := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg})
		id := start(t, e, loop.Spec{Messages: prompt("Say hi."), Owner: owner})
		collect(t, store, id)
		if got := snapshot(t, store, id).Owner; got != owner {
			t.Errorf("snapshot owner %q, want %q", got, owner)
		}
		raw, err := store.Snapshot(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["owner"]; ok != (owner != "") {
			t.Errorf("owner %q: member owner present = %v", owner, ok)
		}
	}
}

// endLimits are shared loop limits whose release calls onEnd: they show
// when a run gives back its caller's loop.
type endLimits struct{ onEnd func() }

func (endLimits) Allow(context.Context, string, int, int) (bool, time.Duration, error) {
	return true, 0, nil
}

func (l endLimits) StartLoop(context.Context, string, int) (func(), bool, error) {
	return l.onEnd, true, nil
}

// callerWithLimits returns a caller whose loops are counted by shared.
func callerWithLimits(t *testing.T, shared access.SharedLimits) (*access.Guard, *access.Caller) {
	t.Helper()
	g, err := access.New(access.Options{Keys: []access.Key{{Name: "ci", Digest: access.HashKey("k"), ConcurrentLoops: 1}}, Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.Authenticate("Bearer k")
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

// TestLoopReleased checks that a run gives back its caller's loop once,
// after its terminal event, and that Close waits for it; and that a
// refused spec never takes one.
func TestLoopReleased(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	store := memory.New(memory.Options{})
	var calls atomic.Int32
	statusAtEnd := make(chan string, 2)
	var id string
	idSet := make(chan struct{})
	onEnd := func() {
		calls.Add(1)
		<-idSet
		statusAtEnd <- snapshot(t, store, id).Status
	}
	g, caller := callerWithLimits(t, endLimits{onEnd})
	e, _ := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg, Access: g, Store: store})
	id = start(t, e, loop.Spec{Messages: prompt("Say hi."), Caller: caller})
	close(idSet)
	collect(t, store, id)
	if got := testwait.Recv(t, statusAtEnd, "release"); got != loop.StatusCompleted {
		t.Errorf("status when the loop was released: %q, want %q", got, loop.StatusCompleted)
	}
	e.Close()
	if n := calls.Load(); n != 1 {
		t.Errorf("released %d times, want 1", n)
	}

	g2, caller2 := callerWithLimits(t, endLimits{func() { calls.Add(1) }})
	e2, _ := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg, Access: g2})
	zero := 0
	if _, err := e2.Start(context.Background(), loop.Spec{Messages: prompt("x"), MaxIterations: &zero, Caller: caller2}); err == nil {
		t.Fatal("a spec with maxIterations 0 was accepted")
	}
	e2.Close()
	if n := calls.Load(); n != 1 {
		t.Errorf("a refused spec was released (%d releases in all, want 1)", n)
	}
}
