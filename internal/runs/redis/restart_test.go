package redis

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/testing/redistest"
)

// TestRedisRestarted: Redis, with its append-only file, restarts in the
// middle of a run. An append made while it is down is retried until it
// is back and added once; the subscriber on another Store gets every
// event once, then the end.
func TestRedisRestarted(t *testing.T) {
	ctx := t.Context()
	srv := redistest.New(t, true)
	var seen counter
	o := Options{Prefix: prefix(), Block: 50 * time.Millisecond, Retry: wait, Observe: seen.observe}
	// As the app makes them: go-redis does not retry, the Store does.
	a := New(srv.Client(t, goredis.Options{MaxRetries: -1}), o)
	o.Observe = nil
	b := New(srv.Client(t, goredis.Options{MaxRetries: -1}), o)
	t.Cleanup(func() { _, _ = a.Close(), b.Close() })
	if err := a.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, "r", "tool.completed", data(i)); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := b.Subscribe(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := readN(t, sub, 3)

	srv.Down(t)
	type result struct {
		ev  runs.Event
		err error
	}
	appended := make(chan result, 1)
	go func() {
		ev, err := a.Append(ctx, "r", "tool.completed", data(4))
		appended <- result{ev, err}
	}()
	poll(t, "an append that Redis did not answer", func() (bool, string) {
		n := seen.count("append")
		return n > 3, fmt.Sprintf("%d append operations", n)
	})
	srv.Up(t)
	select {
	case r := <-appended:
		if r.err != nil || r.ev.ID != 4 {
			t.Fatalf("the append made while Redis was down: %+v, %v; want event 4", r.ev, r.err)
		}
	case <-time.After(wait):
		t.Fatal("the append made while Redis was down did not end")
	}
	if _, err := a.Append(ctx, "r", "tool.completed", data(5)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Finish(ctx, "r", "loop.completed", data(6), nil); err != nil {
		t.Fatal(err)
	}
	got = append(got, readN(t, sub, 3)...)
	if err := ended(t, sub); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6}, eventIDs(got)); diff != "" {
		t.Errorf("ids on B (-want +got):\n%s", diff)
	}
	admin := srv.Client(t, goredis.Options{})
	if n, err := admin.XLen(ctx, a.eventsKey("r")).Result(); err != nil || n != 6 {
		t.Errorf("XLEN = %d, %v; want 6", n, err)
	}
}

// TestRedisRestartedEmpty: Redis restarts without its data in the middle
// of a run. The run is gone: its subscriber's stream ends with
// ErrNotFound instead of waiting for ever, the owner's next append says
// so (the loop then stops), and its lease is no longer renewed.
func TestRedisRestartedEmpty(t *testing.T) {
	ctx := t.Context()
	srv := redistest.New(t, false)
	o := Options{Prefix: prefix(), Block: 50 * time.Millisecond, Retry: wait}
	a := New(srv.Client(t, goredis.Options{MaxRetries: -1}), o)
	b := New(srv.Client(t, goredis.Options{MaxRetries: -1}), o)
	t.Cleanup(func() { _, _ = a.Close(), b.Close() })
	if err := a.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "r", "tool.completed", data(1)); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	readN(t, sub, 1)
	srv.Down(t)
	srv.Up(t)
	if err := ended(t, sub); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("the subscription ended with %v, want ErrNotFound", err)
	}
	if _, err := a.Append(ctx, "r", "tool.completed", data(2)); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Append after the restart = %v, want ErrNotFound", err)
	}
	a.hmu.Lock()
	n := len(a.held)
	a.hmu.Unlock()
	if n != 0 {
		t.Errorf("the owner renews %d leases, want none", n)
	}
}
