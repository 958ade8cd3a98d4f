package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/runs"
)

// abandon is the Abandon of these tests: a terminal event and a snapshot
// that quote the reason and the snapshot they end.
func abandon(id string, snapshot json.RawMessage, reason string) (string, json.RawMessage, json.RawMessage) {
	b, _ := json.Marshal(map[string]string{"id": id, "status": "failed", "error": reason, "was": string(snapshot)})
	return "loop.completed", b, b
}

// counter counts the Redis operations of a Store by name, and lets a test
// wait until one was done n times.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) observe(op string, _ time.Duration, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[op]++
}

func (c *counter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

// TestAbandonedRunEnds: when the Store that created a run stops (it stops
// renewing the run's lease), another Store's janitor ends the run within
// the lease plus a third of it, once, and every subscriber, on every
// Store, gets the terminal event after the events before it.
func TestAbandonedRunEnds(t *testing.T) {
	ctx := t.Context()
	const lease = 300 * time.Millisecond
	rs := replicas(t, 3, Options{Lease: lease, Abandon: abandon, Block: 50 * time.Millisecond})
	a, b, c := rs[0], rs[1], rs[2]
	admin := newClient(t)
	if err := a.Create(ctx, "r", json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := a.Append(ctx, "r", "tool.completed", data(i)); err != nil {
			t.Fatal(err)
		}
	}
	var subs []runs.Subscription
	for _, s := range []*Store{b, c} {
		sub, err := s.Subscribe(ctx, "r", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		readN(t, sub, 2)
		subs = append(subs, sub)
	}
	if err := a.Close(); err != nil { // a dies: no renewal, no Finish
		t.Fatal(err)
	}
	died := time.Now()
	_, final, _ := abandon("r", json.RawMessage(`{"status":"running"}`), AbandonedReason)
	for i, sub := range subs {
		got := readN(t, sub, 1)
		if i == 0 {
			took := time.Since(died)
			t.Logf("the run ended %v after its owner stopped (lease %v)", took, lease)
			// The bound, and the time a loaded machine may take to tell.
			if bound := lease + lease/3 + time.Second; took > bound {
				t.Errorf("the run ended %v after its owner stopped, want within %v", took, bound)
			}
		}
		want := []runs.Event{{ID: 3, Name: "loop.completed", Data: final}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("subscriber %d (-want +got):\n%s", i, diff)
		}
		if err := ended(t, sub); err != nil {
			t.Errorf("subscriber %d: Err() = %v, want nil", i, err)
		}
	}
	if n, err := admin.XLen(ctx, b.eventsKey("r")).Result(); err != nil || n != 3 {
		t.Errorf("XLEN = %d, %v; want 3 (one terminal event)", n, err)
	}
	if snap, err := c.Snapshot(ctx, "r"); err != nil || string(snap) != string(final) {
		t.Errorf("snapshot = %s, %v; want %s", snap, err, final)
	}
	if err := b.Cancel(ctx, "r"); !errors.Is(err, runs.ErrFinished) {
		t.Errorf("Cancel = %v, want ErrFinished", err)
	}
	if n, err := admin.SCard(ctx, b.runningKey()).Result(); err != nil || n != 0 {
		t.Errorf("running runs = %d, %v; want 0", n, err)
	}
}

// TestLeaseKeptWhileOwnerLives: a run whose owner renews its lease is not
// ended, however many times the janitors look. (The lease is long enough
// for a loaded machine: an owner whose renewals all stall for a whole
// lease does lose its run.)
func TestLeaseKeptWhileOwnerLives(t *testing.T) {
	ctx := t.Context()
	const lease = 600 * time.Millisecond
	var seen counter
	o := Options{Lease: lease, Abandon: abandon, Prefix: prefix(), Observe: seen.observe}
	a, b := New(newClient(t), o), New(newClient(t), o)
	t.Cleanup(func() { _, _ = a.Close(), b.Close() })
	if err := a.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	// Two janitors sweep 12 times each, in two operations a sweep: 4
	// leases long.
	poll(t, "12 sweeps", func() (bool, string) {
		n := seen.count("sweep")
		return n >= 2*2*12, fmt.Sprintf("%d sweep operations", n)
	})
	if _, err := a.Append(ctx, "r", "tool.completed", data(1)); err != nil {
		t.Errorf("Append after 4 leases = %v, want the run still running", err)
	}
	if seen.count("abandon") != 0 {
		t.Errorf("%d abandon scripts ran, want none", seen.count("abandon"))
	}
}

// TestOneJanitorWins: janitors that find the same expired lease at once
// end the run once.
func TestOneJanitorWins(t *testing.T) {
	ctx := t.Context()
	rs := replicas(t, 6, Options{Abandon: abandon}) // the default lease: no sweep during the test
	admin := newClient(t)
	owner := rs[0]
	if err := owner.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Append(ctx, "r", "tool.completed", data(1)); err != nil {
		t.Fatal(err)
	}
	owner.unhold("r") // the owner stops
	if err := admin.Del(ctx, owner.leaseKey("r")).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, s := range rs[1:] {
		wg.Go(func() { s.end("r") })
	}
	wg.Wait()
	entries, err := admin.XRange(ctx, owner.eventsKey("r"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.ID+" "+fmt.Sprint(e.Values["n"]))
	}
	if diff := cmp.Diff([]string{"1-0 tool.completed", "2-0 loop.completed"}, got); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
}

// TestJanitorLeavesLeasedRuns: a janitor does not end a run whose lease
// is there, even when it was told the lease was gone (the owner renewed it
// meanwhile).
func TestJanitorLeavesLeasedRuns(t *testing.T) {
	ctx := t.Context()
	rs := replicas(t, 2, Options{Abandon: abandon})
	if err := rs[0].Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	rs[1].end("r")
	if _, err := rs[0].Append(ctx, "r", "tool.completed", data(1)); err != nil {
		t.Errorf("Append = %v, want the run still running", err)
	}
}

// TestLateOwner: an owner whose lease expired while it was alive (stalled,
// or cut from Redis), after a janitor ended its run, finds the run
// finished: its watch of the run closes, so its loop stops, and it cannot
// add events or replace the snapshot that says why the run ended. An owner
// whose lease expired with no janitor acting takes it again.
func TestLateOwner(t *testing.T) {
	ctx := t.Context()
	rs := replicas(t, 2, Options{Abandon: abandon})
	a, b := rs[0], rs[1]
	admin := newClient(t)
	for _, id := range []string{"ended", "kept"} {
		if err := a.Create(ctx, id, json.RawMessage(`{"status":"running"}`)); err != nil {
			t.Fatal(err)
		}
		if err := admin.Del(ctx, a.leaseKey(id)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, err := a.Cancelled(ctx, "ended")
	if err != nil {
		t.Fatal(err)
	}
	b.end("ended")
	a.renew()
	if !isClosed(cancelled, wait) {
		t.Error("the late owner's watch did not close")
	}
	if err := a.SetSnapshot(ctx, "ended", json.RawMessage(`{"status":"running"}`)); !errors.Is(err, runs.ErrFinished) {
		t.Errorf("SetSnapshot = %v, want ErrFinished", err)
	}
	if _, err := a.Append(ctx, "ended", "tool.completed", nil); !errors.Is(err, runs.ErrFinished) {
		t.Errorf("Append = %v, want ErrFinished", err)
	}
	if _, err := a.Finish(ctx, "ended", "loop.completed", nil, json.RawMessage(`{"status":"cancelled"}`)); !errors.Is(err, runs.ErrFinished) {
		t.Errorf("Finish = %v, want ErrFinished", err)
	}
	if snap, _ := b.Snapshot(ctx, "ended"); !json.Valid(snap) || string(snap) == `{"status":"running"}` {
		t.Errorf("snapshot = %s, want the janitor's", snap)
	}
	if got, err := admin.Get(ctx, a.leaseKey("kept")).Result(); err != nil || got != a.token {
		t.Errorf("lease of the kept run = %q, %v; want the owner's token again", got, err)
	}
	a.hmu.Lock()
	_, held := a.held["ended"]
	a.hmu.Unlock()
	if held {
		t.Error("the owner still renews the lease of the ended run")
	}
}

// TestRetriedAppendOnce: an append retried after its first try was done
// (its answer lost) answers the first try's event and adds none.
func TestRetriedAppendOnce(t *testing.T) {
	ctx := t.Context()
	s := replicas(t, 1, Options{})[0]
	admin := newClient(t)
	if err := s.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	run := func(op string, retry bool) int64 {
		t.Helper()
		now := s.now()
		args := s.addArgs("r", "tool.completed", nil, nil, false)
		args.Now, args.ExpiresAt, args.Op, args.Retry = now.UnixMilli(), now.Add(s.ttl).UnixMilli(), op, retry
		n, err := appendScript.Run(ctx, s.c, s.addKeys("r"), args.String()).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	got := []int64{run("x.1", false), run("x.2", false), run("x.1", true), run("x.3", true)}
	if diff := cmp.Diff([]int64{1, 2, 1, 3}, got); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if n, err := admin.XLen(ctx, s.eventsKey("r")).Result(); err != nil || n != 3 {
		t.Errorf("XLEN = %d, %v; want 3", n, err)
	}
}

// TestFailedFinishLetsLeaseGo: a Finish that Redis never answered stops
// the renewal of the run's lease, so that a janitor ends the run once
// Redis answers again.
func TestFailedFinishLetsLeaseGo(t *testing.T) {
	ctx := t.Context()
	s := New(newClient(t), Options{Prefix: prefix(), Retry: -1})
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	s.c.AddHook(&failScripts{calls: &calls, fails: -1})
	if _, err := s.Finish(ctx, "r", "loop.completed", nil, nil); err == nil {
		t.Fatal("Finish succeeded through a failing connection")
	}
	if calls.Load() == 0 {
		t.Fatal("the hook saw no script")
	}
	s.hmu.Lock()
	_, held := s.held["r"]
	s.hmu.Unlock()
	if held {
		t.Error("the Store still renews the lease of a run whose Finish failed")
	}
}

// failScripts is a go-redis hook that fails the first fails scripts (all,
// if fails < 0) as a broken connection would; with run, after Redis ran
// them: their answer is lost.
type failScripts struct {
	calls *atomic.Int64
	fails int64
	run   bool
}

func (h *failScripts) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *failScripts) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		n := h.calls.Add(1)
		if h.fails >= 0 && n > h.fails {
			return next(ctx, cmd)
		}
		if h.run {
			_ = next(ctx, cmd)
		}
		err := errors.New("read: connection reset by peer (test)")
		cmd.SetErr(err)
		return err
	}
}

func (h *failScripts) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// TestAppendRetried: an append whose answer was lost twice (Redis ran it,
// the connection broke) is retried and added once; so is one Redis did
// not run.
func TestAppendRetried(t *testing.T) {
	for _, ran := range []bool{true, false} {
		t.Run(fmt.Sprintf("ran=%v", ran), func(t *testing.T) {
			ctx := t.Context()
			var seen counter
			s := New(newClient(t), Options{Prefix: prefix(), Observe: seen.observe})
			t.Cleanup(func() { _ = s.Close() })
			admin := newClient(t)
			if err := s.Create(ctx, "r", nil); err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			s.c.AddHook(&failScripts{calls: &calls, fails: 2, run: ran})
			var got []int64
			for i := 1; i <= 2; i++ {
				ev, err := s.Append(ctx, "r", "tool.completed", data(i))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.ID)
			}
			if diff := cmp.Diff([]int64{1, 2}, got); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if n, err := admin.XLen(ctx, s.eventsKey("r")).Result(); err != nil || n != 2 {
				t.Errorf("XLEN = %d, %v; want 2", n, err)
			}
			if n := seen.count("append"); n != 4 {
				t.Errorf("%d append operations, want 4 (two failed tries)", n)
			}
		})
	}
}
