package access

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/testing/redistest"
	"github.com/sampled/sampled/internal/testing/testlog"
)

// prefixes numbers the key prefixes of the tests' limits.
var prefixes atomic.Int64

// newPrefix returns a key prefix no other test of this run uses.
func newPrefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// replica is one process's view of the shared limits: its own client of
// the test server, its own RedisLimits and its own Guard over the keys.
type replica struct {
	g *Guard
	l *RedisLimits
}

// replicas returns n replicas sharing one prefix on the test server, closed
// with the test.
func replicas(t *testing.T, n int, ro RedisOptions, o Options) []replica {
	t.Helper()
	ro.Prefix = newPrefix()
	out := make([]replica, n)
	for i := range out {
		l := NewRedisLimits(redistest.Client(t, 10), ro)
		t.Cleanup(l.Close)
		o.Shared, o.Budgets = l, l
		out[i] = replica{g: mustGuard(t, o), l: l}
	}
	return out
}

// callers authenticates bearer on every guard, in order.
func callers(t *testing.T, gs []*Guard, bearer string) []*Caller {
	t.Helper()
	var out []*Caller
	for _, g := range gs {
		c, err := g.Authenticate("Bearer " + bearer)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// TestSharedRate: a key's rate behaves the same in process and in Redis,
// and two replicas on one Redis share it: 60 a minute is a burst of 6 in
// total, the 7th is refused with a wait of at most a second, and after
// that wait one more is allowed.
func TestSharedRate(t *testing.T) {
	keys := Options{RequestsPerMinute: 60, Keys: []Key{{Name: "a", Digest: HashKey("a")}, {Name: "b", Digest: HashKey("b")}}}
	guards := func(rs []replica) []*Guard {
		var out []*Guard
		for _, r := range rs {
			out = append(out, r.g)
		}
		return out
	}
	tests := []struct {
		name   string
		guards func(t *testing.T) []*Guard
	}{
		{"in process", func(t *testing.T) []*Guard { return []*Guard{mustGuard(t, keys)} }},
		{"redis, one replica", func(t *testing.T) []*Guard { return guards(replicas(t, 1, RedisOptions{}, keys)) }},
		{"redis, two replicas", func(t *testing.T) []*Guard { return guards(replicas(t, 2, RedisOptions{}, keys)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs := tt.guards(t)
			as := callers(t, gs, "a")
			var got []bool
			var wait time.Duration
			for i := range 8 { // spread over the replicas
				ok, w := gs[i%len(gs)].Allow(t.Context(), as[i%len(gs)])
				got = append(got, ok)
				if !ok && wait == 0 {
					wait = w
				}
			}
			want := []bool{true, true, true, true, true, true, false, false}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("8 requests at once at 60 a minute (-want +got):\n%s", diff)
			}
			if wait <= 0 || wait > time.Second {
				t.Fatalf("the 7th request's wait = %v, want in (0, 1s]", wait)
			}
			if ok, _ := gs[len(gs)-1].Allow(t.Context(), callers(t, gs, "b")[len(gs)-1]); !ok {
				t.Error("b was refused: keys must not share a rate")
			}
			// Waiting what the refusal said lets one more in, on any
			// replica, and one only: refused requests took nothing.
			time.Sleep(wait) // the wait is the limiter's answer under test
			if ok, w := gs[0].Allow(t.Context(), as[0]); !ok {
				t.Fatalf("refused (wait %v) after waiting the %v it was told", w, wait)
			}
			if ok, _ := gs[len(gs)-1].Allow(t.Context(), as[len(gs)-1]); ok {
				t.Error("two allowed after one interval")
			}
		})
	}
}

// TestSharedRateExpires: the rate's key in Redis lives no longer than it
// takes the bucket to refill.
func TestSharedRateExpires(t *testing.T) {
	rs := replicas(t, 1, RedisOptions{}, Options{RequestsPerMinute: 60, Keys: []Key{{Name: "a", Digest: HashKey("a")}}})
	a := callers(t, []*Guard{rs[0].g}, "a")[0]
	for range 3 {
		rs[0].g.Allow(t.Context(), a)
	}
	c := redistest.Client(t, 1)
	ttl, err := c.PTTL(t.Context(), "rate:"+rs[0].l.rateKey("a")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 2*time.Second || ttl > 3*time.Second {
		t.Errorf("PTTL after 3 requests at one a second = %v, want in (2s, 3s]", ttl)
	}
}

// TestSharedLoopCap: two replicas share each key's loop cap; a release on
// either frees a slot for both, once.
func TestSharedLoopCap(t *testing.T) {
	rs := replicas(t, 2, RedisOptions{}, Options{ConcurrentLoops: 2,
		Keys: []Key{{Name: "a", Digest: HashKey("a")}, {Name: "b", Digest: HashKey("b"), ConcurrentLoops: 1}}})
	A, B := rs[0].g, rs[1].g
	as := callers(t, []*Guard{A, B}, "a")
	bs := callers(t, []*Guard{A, B}, "b")
	ctx := t.Context()

	r1, ok1, _ := A.StartLoop(ctx, as[0])
	r2, ok2, _ := B.StartLoop(ctx, as[1])
	_, ok3, wait3 := A.StartLoop(ctx, as[0])
	_, ok4, _ := B.StartLoop(ctx, as[1])
	if diff := cmp.Diff([]bool{true, true, false, false}, []bool{ok1, ok2, ok3, ok4}); diff != "" {
		t.Fatalf("a's loops on A, B, A, B under a cap of 2 (-want +got):\n%s", diff)
	}
	if wait3 <= 0 {
		t.Errorf("refused loop's wait = %v, want > 0", wait3)
	}
	rb, okb1, _ := B.StartLoop(ctx, bs[1])
	_, okb2, _ := A.StartLoop(ctx, bs[0])
	if !okb1 || okb2 {
		t.Fatalf("b's loops on B, A under its own cap of 1: %v %v; want true false (keys must not share a count)", okb1, okb2)
	}
	if got := as[0].Loops() + as[1].Loops(); got != 2 {
		t.Errorf("a's loops on A and B = %d, want 2", got)
	}

	r1() // on A
	r1() // a second release must not free another slot
	if _, ok, _ := B.StartLoop(ctx, as[1]); !ok {
		t.Fatal("B refused a's loop after A released one")
	}
	if _, ok, _ := A.StartLoop(ctx, as[0]); ok {
		t.Fatal("a started a loop past its cap after a double release")
	}
	if got := as[0].Loops(); got != 0 {
		t.Errorf("a's loops on A after its release = %d, want 0", got)
	}

	// Once every loop of b ended, its set is gone from Redis.
	rb()
	c := redistest.Client(t, 1)
	if n, err := c.Exists(ctx, rs[0].l.loopsKey("b")).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS b's loops after its one loop ended = %d, %v; want 0", n, err)
	}
	r2()
}

// TestSharedLoopCapAfterReplicaDies: live replicas keep their loops
// counted past the lease by renewing it; the slot of a replica that dies
// without releasing its loop frees within one lease, while the other
// replica's loop, in the same set, still counts.
func TestSharedLoopCapAfterReplicaDies(t *testing.T) {
	// Renewals come every third of the lease; a lease of 1.5 s and a
	// timeout of 1 s leave room for a loaded machine's late ticks and slow
	// answers.
	const lease = 1500 * time.Millisecond
	rs := replicas(t, 2, RedisOptions{Lease: lease, Timeout: time.Second}, Options{ConcurrentLoops: 2, Keys: []Key{{Name: "a", Digest: HashKey("a")}}})
	A, B := rs[0], rs[1]
	as := callers(t, []*Guard{A.g, B.g}, "a")
	ctx := t.Context()
	if _, ok, _ := A.g.StartLoop(ctx, as[0]); !ok {
		t.Fatal("A's loop refused")
	}
	if _, ok, _ := B.g.StartLoop(ctx, as[1]); !ok {
		t.Fatal("B's loop refused")
	}
	// Past their first lease both loops still count: their replicas
	// renewed them.
	time.Sleep(lease + lease/2) // the passing of time is what is under test
	if _, ok, _ := B.g.StartLoop(ctx, as[1]); ok {
		t.Fatal("B started a loop past the cap of 2 while A's and B's were running")
	}

	A.l.Close() // A dies: no more renewals, and no release
	died := time.Now()
	deadline := died.Add(lease + 2*time.Second)
	for {
		if _, ok, _ := B.g.StartLoop(ctx, as[1]); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's loop still counted %v after it died (lease %v)", time.Since(died), lease)
		}
		time.Sleep(10 * time.Millisecond) // polling Redis's view
	}
	t.Logf("the dead replica's slot freed %v after it died (lease %v)", time.Since(died), lease)
	if _, ok, _ := B.g.StartLoop(ctx, as[1]); ok {
		t.Error("B started a third loop under a cap of 2: its own first loop stopped counting")
	}
}

// hangingRedis accepts connections on a unix socket and never answers;
// it is closed with the test.
func hangingRedis(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "hang.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return sock
}

// TestSharedLimitsFailOpen: with Redis refusing connections or never
// answering, every check ends within its timeout and lets the request,
// loop or model call in, each counted, with one warning in the log; a
// charge is dropped, and Status fails.
func TestSharedLimitsFailOpen(t *testing.T) {
	const timeout = 100 * time.Millisecond
	tests := []struct {
		name string
		sock func(t *testing.T) string
	}{
		{"connection refused", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none.sock") }},
		{"no answer", hangingRedis},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: tt.sock(t), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			var logs testlog.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			l := NewRedisLimits(c, RedisOptions{Timeout: timeout, Logger: log})
			t.Cleanup(l.Close)
			unchecked := map[string]int{}
			var mu sync.Mutex
			g := mustGuard(t, Options{RequestsPerMinute: 60, ConcurrentLoops: 1, TokensPerMinute: 60, Keys: []Key{{Name: "a", Digest: HashKey("a")}},
				Shared: l, Budgets: l, Logger: log, Unchecked: func(limit string) { mu.Lock(); unchecked[limit]++; mu.Unlock() }})
			a, _ := g.Authenticate("Bearer a")
			// slowest is the longest single check: the bound is the timeout
			// plus scheduling, far below go-redis's own 3s read timeout.
			var slowest time.Duration
			timed := func(f func()) {
				start := time.Now()
				f()
				slowest = max(slowest, time.Since(start))
			}
			for i := range 10 { // past the burst of 6
				timed(func() {
					if ok, _ := g.Allow(t.Context(), a); !ok {
						t.Errorf("request %d refused with Redis down", i+1)
					}
				})
			}
			var releases []func()
			for i := range 3 { // past the cap of 1
				timed(func() {
					rel, ok, _ := g.StartLoop(t.Context(), a)
					if !ok {
						t.Errorf("loop %d refused with Redis down", i+1)
						return
					}
					releases = append(releases, rel)
				})
			}
			for _, rel := range releases {
				timed(rel)
			}
			for i := range 3 { // past the 60 tokens a minute
				timed(func() {
					if err := g.Reserve(t.Context(), a, Estimate{Tokens: 50}); err != nil {
						t.Errorf("call %d refused with Redis down: %v", i+1, err)
					}
					g.Charge(t.Context(), a, 50, 1)
				})
			}
			timed(func() {
				if _, err := g.Status(t.Context(), a); err == nil {
					t.Error("Status with Redis down did not fail")
				}
			})
			if slowest > timeout+time.Second {
				t.Errorf("slowest check took %v with a timeout of %v", slowest, timeout)
			}
			if diff := cmp.Diff(map[string]int{LimitRequests: 10, LimitLoops: 3, LimitTokens: 3}, unchecked); diff != "" {
				t.Errorf("unchecked (-want +got):\n%s", diff)
			}
			if got := a.Loops(); got != 0 {
				t.Errorf("%d loops after every release", got)
			}
			if n := strings.Count(logs.String(), "limits fail open"); n != 1 {
				t.Errorf("%d warnings that limits fail open, want 1 (at most one every %v):\n%s", n, LogEvery, logs.String())
			}
		})
	}
}

// BenchmarkSharedAllow is what a keyed request pays with Redis: one
// script call on the test server's unix socket.
func BenchmarkSharedAllow(b *testing.B) {
	l := NewRedisLimits(redistest.Client(b, 10), RedisOptions{Prefix: newPrefix()})
	b.Cleanup(l.Close)
	g, err := New(Options{RequestsPerMinute: 1 << 30, Keys: []Key{{Name: "a", Digest: HashKey("a")}}, Shared: l})
	if err != nil {
		b.Fatal(err)
	}
	c, _ := g.Authenticate("Bearer a")
	for b.Loop() {
		if ok, _ := g.Allow(b.Context(), c); !ok {
			b.Fatal("refused")
		}
	}
}

// BenchmarkSharedStartLoop is what starting and ending a keyed loop pays
// with Redis: two script calls.
func BenchmarkSharedStartLoop(b *testing.B) {
	l := NewRedisLimits(redistest.Client(b, 10), RedisOptions{Prefix: newPrefix()})
	b.Cleanup(l.Close)
	g, err := New(Options{ConcurrentLoops: 10, Keys: []Key{{Name: "a", Digest: HashKey("a")}}, Shared: l})
	if err != nil {
		b.Fatal(err)
	}
	c, _ := g.Authenticate("Bearer a")
	for b.Loop() {
		release, ok, _ := g.StartLoop(b.Context(), c)
		if !ok {
			b.Fatal("refused")
		}
		release()
	}
}
