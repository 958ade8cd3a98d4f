package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/testing/redistest"
)

// wait bounds every wait in these tests: a guard against hangs, not a
// performance bound.
const wait = 30 * time.Second

// replicas returns n stores sharing one prefix on the test server, each
// with a client of its own, as separate processes would have; closed with
// the test.
func replicas(t *testing.T, n int, o Options) []*Store {
	t.Helper()
	o.Prefix = prefix()
	out := make([]*Store, n)
	for i := range out {
		s := New(newClient(t), o)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		out[i] = s
	}
	return out
}

func data(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)) }

// readN reads n events from sub.
func readN(t *testing.T, sub runs.Subscription, n int) []runs.Event {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var out []runs.Event
	for len(out) < n {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("closed after %d of %d events: %v", len(out), n, sub.Err())
			}
			out = append(out, ev)
		case <-timer.C:
			t.Fatalf("%d of %d events within %s", len(out), n, wait)
		}
	}
	return out
}

// ended waits for sub's channel to close with nothing more and returns Err.
func ended(t *testing.T, sub runs.Subscription) error {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if ok {
			t.Fatalf("got event %d, want the end", ev.ID)
		}
		return sub.Err()
	case <-time.After(wait):
		t.Fatalf("no end within %s", wait)
		return nil
	}
}

func eventIDs(evs []runs.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

// isClosed reports whether ch is closed, waiting up to d for it.
func isClosed(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// poll calls cond until it holds, failing after wait.
func poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (%s)", what, wait, state)
		}
		time.Sleep(5 * time.Millisecond) // polling Redis's view
	}
}

// TestTwoReplicas: a run written on one store is followed on another by
// Last-Event-ID, and a Cancel on the follower's store reaches the watch on
// the writer's.
func TestTwoReplicas(t *testing.T) {
	ctx := t.Context()
	rs := replicas(t, 2, Options{})
	a, b := rs[0], rs[1]
	if err := a.Create(ctx, "r", json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	cancelled, err := a.Cancelled(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, "r", "tool.completed", data(i)); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := b.Subscribe(ctx, "r", 2) // Last-Event-ID: 2
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := readN(t, sub, 1)
	if _, err := a.Append(ctx, "r", "tool.completed", data(4)); err != nil {
		t.Fatal(err)
	}
	got = append(got, readN(t, sub, 1)...)
	// B reconnects after the last id it read, then A writes on.
	sub.Close()
	sub, err = b.Subscribe(ctx, "r", got[len(got)-1].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	if err := b.Cancel(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(wait):
		t.Fatal("a Cancel on replica B did not reach the watch on replica A")
	}
	if _, err := a.Finish(ctx, "r", "loop.cancelled", data(5), json.RawMessage(`{"status":"cancelled"}`)); err != nil {
		t.Fatal(err)
	}
	got = append(got, readN(t, sub, 1)...)
	if err := ended(t, sub); err != nil {
		t.Errorf("Err() = %v after the terminal event, want nil", err)
	}
	want := []runs.Event{
		{ID: 3, Name: "tool.completed", Data: data(3)},
		{ID: 4, Name: "tool.completed", Data: data(4)},
		{ID: 5, Name: "loop.cancelled", Data: data(5)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events on B (-want +got):\n%s", diff)
	}
	snap, err := b.Snapshot(ctx, "r")
	if err != nil || string(snap) != `{"status":"cancelled"}` {
		t.Errorf("B's snapshot = %s, %v; want the final one", snap, err)
	}
	if err := b.Cancel(ctx, "r"); !errors.Is(err, runs.ErrFinished) {
		t.Errorf("Cancel after Finish = %v, want ErrFinished", err)
	}
}

// blockedReads counts the clients blocked in XREAD on the test server.
func blockedReads(t *testing.T, c *goredis.Client) (int, string) {
	t.Helper()
	list, err := c.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(list) {
		if strings.Contains(line, "cmd=xread") && strings.Contains(line, "flags=b") {
			n++
		}
	}
	return n, fmt.Sprintf("%d blocked XREADs", n)
}

// TestOneReadPerRunPerReplica: many subscribers of a run on a replica
// share one blocking read; a loop whose subscribers all left ends.
func TestOneReadPerRunPerReplica(t *testing.T) {
	ctx := t.Context()
	rs := replicas(t, 2, Options{Block: 50 * time.Millisecond})
	a, b := rs[0], rs[1]
	admin := newClient(t)
	for _, id := range []string{"r", "q"} {
		if err := a.Create(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	type follow struct {
		s  *Store
		id string
		n  int
	}
	var subsA []runs.Subscription
	var all []runs.Subscription
	for _, f := range []follow{{a, "r", 300}, {b, "r", 200}, {a, "q", 20}} {
		for range f.n {
			sub, err := f.s.Subscribe(ctx, f.id, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sub.Close)
			all = append(all, sub)
			if f.s == a && f.id == "r" {
				subsA = append(subsA, sub)
			}
		}
	}
	// Three loops: r on A, r on B, q on A.
	poll(t, "three blocked reads", func() (bool, string) {
		n, s := blockedReads(t, admin)
		return n == 3, s
	})
	if _, err := a.Append(ctx, "r", "tool.completed", data(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "q", "tool.completed", data(1)); err != nil {
		t.Fatal(err)
	}
	for i, sub := range all {
		if got := readN(t, sub, 1); got[0].ID != 1 {
			t.Fatalf("subscriber %d: event %d, want 1", i, got[0].ID)
		}
	}
	for _, sub := range subsA {
		sub.Close()
	}
	poll(t, "A's loop on r ends", func() (bool, string) {
		n, s := blockedReads(t, admin)
		return n == 2, s
	})
	if got, want := liveSubs(a)+liveSubs(b), 220; got != want {
		t.Errorf("%d live subscriptions, want %d", got, want)
	}
}

// TestKeysExpire: a finished run's keys expire in Redis after the TTL, by
// Redis's clock; a running run's keys do not expire.
func TestKeysExpire(t *testing.T) {
	ctx := t.Context()
	const ttl = 200 * time.Millisecond
	s := replicas(t, 1, Options{TTL: ttl})[0]
	admin := newClient(t)
	for _, id := range []string{"done", "running"} {
		if err := s.Create(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, id, "tool.completed", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Finish(ctx, "done", "loop.completed", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{s.metaKey("running"), s.eventsKey("running")} {
		if d, err := admin.PTTL(ctx, key).Result(); err != nil || d != -1 {
			t.Errorf("PTTL %s = %v, %v; want no expiry (-1)", key, d, err)
		}
	}
	poll(t, "the finished run's keys expire", func() (bool, string) {
		n, err := admin.Exists(ctx, s.metaKey("done"), s.eventsKey("done")).Result()
		return err == nil && n == 0, fmt.Sprintf("%d keys left, %v", n, err)
	})
	if _, err := s.Snapshot(ctx, "done"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Snapshot of the expired run = %v, want ErrNotFound", err)
	}
	if _, err := s.Snapshot(ctx, "running"); err != nil {
		t.Errorf("Snapshot of the running run = %v", err)
	}
}

// TestLiveLoopReconnects: when the live loop's connection is killed, the
// loop reconnects and its subscriber gets every event once.
func TestLiveLoopReconnects(t *testing.T) {
	ctx := t.Context()
	s := replicas(t, 1, Options{Block: 50 * time.Millisecond})[0]
	admin := newClient(t)
	if err := s.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := s.Append(ctx, "r", "tool.completed", data(1)); err != nil {
		t.Fatal(err)
	}
	got := readN(t, sub, 1)
	s.mu.Lock()
	f := s.followers["r"]
	s.mu.Unlock()
	f.mu.Lock()
	connID := f.connID
	f.mu.Unlock()
	if connID == 0 {
		t.Fatal("the live loop has no connection id")
	}
	if err := admin.ClientKillByFilter(ctx, "ID", fmt.Sprint(connID)).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 5; i++ {
		if _, err := s.Append(ctx, "r", "tool.completed", data(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Finish(ctx, "r", "loop.completed", data(6), nil); err != nil {
		t.Fatal(err)
	}
	got = append(got, readN(t, sub, 5)...)
	if err := ended(t, sub); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6}, eventIDs(got)); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

// TestCancelAfterFeedLost: a Cancel whose message a replica missed, while
// its cancellation feed was disconnected, reaches the replica's watch once
// the feed is back. The missed message is made certain by recording the
// request as Cancel does but without publishing it.
func TestCancelAfterFeedLost(t *testing.T) {
	ctx := t.Context()
	a := replicas(t, 1, Options{})[0]
	admin := newClient(t)
	if err := a.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	cancelled, err := a.Cancelled(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.HSet(ctx, a.metaKey("r"), "cancel", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if isClosed(cancelled, 50*time.Millisecond) {
		t.Fatal("the watch closed without a message")
	}
	// The feed is the client subscribed to one channel (RESP3 clients
	// are not of TYPE pubsub).
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for line := range strings.Lines(list) {
		if !strings.Contains(line, " sub=1 ") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
		if err := admin.ClientKillByFilter(ctx, "ID", id).Err(); err != nil {
			t.Fatal(err)
		}
		killed++
	}
	if killed != 1 {
		t.Fatalf("killed %d subscribed clients, want 1 (the feed):\n%s", killed, list)
	}
	if !isClosed(cancelled, wait) {
		t.Fatal("the recorded Cancel did not reach the watch after the feed reconnected")
	}
	// A watch whose ctx ended is dropped.
	wctx, stop := context.WithCancel(ctx)
	if err := a.Create(ctx, "other", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Cancelled(wctx, "other"); err != nil {
		t.Fatal(err)
	}
	stop()
	poll(t, "the watch is dropped", func() (bool, string) {
		a.wmu.Lock()
		defer a.wmu.Unlock()
		return len(a.watches["other"]) == 0, fmt.Sprintf("%d watches", len(a.watches["other"]))
	})
}

// TestReadsClient: with a client of their own for the live loops, runs
// followed at once never take the connections commands need: a store
// whose command pool holds 2 connections follows 20 runs and still
// appends to each.
func TestReadsClient(t *testing.T) {
	ctx := t.Context()
	const followed = 20
	s := New(redistest.Client(t, 2), Options{Reads: redistest.Client(t, followed+1), Prefix: prefix(), Block: 50 * time.Millisecond})
	t.Cleanup(func() { _ = s.Close() })
	admin := newClient(t)
	var subs []runs.Subscription
	for i := range followed {
		id := fmt.Sprint("r", i)
		if err := s.Create(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		sub, err := s.Subscribe(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sub.Close)
		subs = append(subs, sub)
	}
	poll(t, "a blocked read per run", func() (bool, string) {
		n, s := blockedReads(t, admin)
		return n == followed, s
	})
	for i, sub := range subs {
		if _, err := s.Append(ctx, fmt.Sprint("r", i), "tool.completed", data(1)); err != nil {
			t.Fatal(err)
		}
		if got := readN(t, sub, 1); got[0].ID != 1 {
			t.Fatalf("run %d: event %d, want 1", i, got[0].ID)
		}
	}
}

// TestRunVanishes: when a followed run's keys disappear while it runs (a
// Redis restarted without its data), its subscriptions end with
// ErrNotFound instead of waiting for ever.
func TestRunVanishes(t *testing.T) {
	ctx := t.Context()
	s := replicas(t, 1, Options{Block: 50 * time.Millisecond})[0]
	admin := newClient(t)
	if err := s.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "r", "tool.completed", data(1)); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	readN(t, sub, 1)
	if err := admin.Del(ctx, s.metaKey("r"), s.eventsKey("r")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, sub); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Err() = %v, want ErrNotFound", err)
	}
}
