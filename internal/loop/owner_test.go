package loop_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/sampled/sampled/internal/loop"
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

// TestOnEnd checks that OnEnd runs once, after the terminal event, and that
// Close waits for it; and that a refused spec never calls it.
func TestOnEnd(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	e, store := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg})
	var calls atomic.Int32
	statusAtEnd := make(chan string, 2)
	var id string
	idSet := make(chan struct{})
	onEnd := func() {
		calls.Add(1)
		<-idSet
		statusAtEnd <- snapshot(t, store, id).Status
	}
	id = start(t, e, loop.Spec{Messages: prompt("Say hi."), OnEnd: onEnd})
	close(idSet)
	collect(t, store, id)
	if got := testwait.Recv(t, statusAtEnd, "OnEnd"); got != loop.StatusCompleted {
		t.Errorf("status when OnEnd ran: %q, want %q", got, loop.StatusCompleted)
	}
	e.Close()
	if n := calls.Load(); n != 1 {
		t.Errorf("OnEnd called %d times, want 1", n)
	}

	e2, _ := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg})
	zero := 0
	if _, err := e2.Start(context.Background(), loop.Spec{Messages: prompt("x"), MaxIterations: &zero, OnEnd: func() { calls.Add(1) }}); err == nil {
		t.Fatal("a spec with maxIterations 0 was accepted")
	}
	e2.Close()
	if n := calls.Load(); n != 1 {
		t.Errorf("a refused spec called OnEnd (%d calls in all, want 1)", n)
	}
}
