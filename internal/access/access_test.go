package access

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func mustGuard(t *testing.T, o Options) *Guard {
	t.Helper()
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestParseDigest(t *testing.T) {
	// printf %s secret | sha256sum
	const secretHex = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
	d, err := ParseDigest("sha256:" + secretHex)
	if err != nil {
		t.Fatal(err)
	}
	if d != HashKey("secret") {
		t.Errorf("ParseDigest(sha256 of secret) = %s, want HashKey(secret) = %s", d, HashKey("secret"))
	}
	if got, want := d.String(), "sha256:"+secretHex; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, bad := range []string{"", secretHex, "sha256:" + secretHex[:62], "sha256:" + secretHex + "00", "sha256:" + strings.Repeat("zz", 32), "md5:" + secretHex} {
		if _, err := ParseDigest(bad); err == nil {
			t.Errorf("ParseDigest(%q): no error", bad)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	g := mustGuard(t, Options{Keys: []Key{{Name: "alice", Digest: HashKey("ka")}, {Name: "bob", Digest: HashKey("kb")}}})
	tests := []struct {
		header string
		want   string
		err    error
	}{
		{"Bearer ka", "alice", nil},
		{"bearer kb", "bob", nil},
		{"Bearer  kb ", "bob", nil},
		{"", "", ErrNoKey},
		{"Bearer", "", ErrNoKey},
		{"Bearer ", "", ErrNoKey},
		{"Basic ka", "", ErrNoKey},
		{"ka", "", ErrNoKey},
		{"Bearer kc", "", ErrBadKey},
		{"Bearer ka ", "alice", nil},
		{"Bearer kaa", "", ErrBadKey},
	}
	for _, tt := range tests {
		c, err := g.Authenticate(tt.header)
		if !errors.Is(err, tt.err) {
			t.Errorf("Authenticate(%q): error %v, want %v", tt.header, err, tt.err)
			continue
		}
		if err == nil && c.Name() != tt.want {
			t.Errorf("Authenticate(%q) = %q, want %q", tt.header, c.Name(), tt.want)
		}
	}
	if diff := cmp.Diff([]string{"alice", "bob"}, g.Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}

	open := mustGuard(t, Options{})
	if open.Enabled() {
		t.Error("a Guard without keys says it is enabled")
	}
	for _, h := range []string{"", "Bearer anything"} {
		c, err := open.Authenticate(h)
		if err != nil || c.Name() != "" {
			t.Errorf("without keys, Authenticate(%q) = %v, %v; want the anonymous caller", h, c, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for name, o := range map[string]Options{
		"no name":        {Keys: []Key{{Digest: HashKey("a")}}},
		"name twice":     {Keys: []Key{{Name: "a", Digest: HashKey("a")}, {Name: "a", Digest: HashKey("b")}}},
		"key twice":      {Keys: []Key{{Name: "a", Digest: HashKey("a")}, {Name: "b", Digest: HashKey("a")}}},
		"negative rpm":   {RequestsPerMinute: -1},
		"negative loops": {Keys: []Key{{Name: "a", Digest: HashKey("a"), ConcurrentLoops: -2}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestAllowRate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := mustGuard(t, Options{RequestsPerMinute: 60, Keys: []Key{
		{Name: "default", Digest: HashKey("d")},
		{Name: "slow", Digest: HashKey("s"), RequestsPerMinute: 2},
	}})
	g.now = func() time.Time { return now }
	def, _ := g.Authenticate("Bearer d")
	slow, _ := g.Authenticate("Bearer s")

	// 60 a minute: a burst of 6, then one a second.
	for i := range 6 {
		if ok, _ := g.Allow(t.Context(), def); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := g.Allow(t.Context(), def)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("7th request at once: allowed %v, wait %v; want refused with a wait in (0, 1s]", ok, wait)
	}
	// A refused request takes nothing: after the wait one is allowed.
	now = now.Add(wait)
	if ok, _ := g.Allow(t.Context(), def); !ok {
		t.Error("refused after waiting the time it was told")
	}

	// 2 a minute: one at once, then one per 30 s.
	if ok, _ := g.Allow(t.Context(), slow); !ok {
		t.Fatal("first request of slow refused")
	}
	ok, wait = g.Allow(t.Context(), slow)
	if ok || wait < 29*time.Second || wait > 30*time.Second {
		t.Errorf("slow's second request: allowed %v, wait %v; want refused, about 30s", ok, wait)
	}
	// Keys do not share a rate.
	if ok, _ := g.Allow(t.Context(), def); ok {
		t.Error("default allowed past its rate")
	}

	anon, _ := mustGuard(t, Options{RequestsPerMinute: 1}).Authenticate("")
	for range 100 {
		if ok, _ := g.Allow(t.Context(), anon); !ok {
			t.Fatal("the anonymous caller of a Guard without keys was rate limited")
		}
	}
}

func TestStartLoop(t *testing.T) {
	g := mustGuard(t, Options{ConcurrentLoops: 2, Keys: []Key{{Name: "a", Digest: HashKey("a")}, {Name: "b", Digest: HashKey("b"), ConcurrentLoops: 1}}})
	a, _ := g.Authenticate("Bearer a")
	b, _ := g.Authenticate("Bearer b")
	r1, ok1, _ := g.StartLoop(t.Context(), a)
	_, ok2, _ := g.StartLoop(t.Context(), a)
	_, ok3, wait := g.StartLoop(t.Context(), a)
	if !ok1 || !ok2 || ok3 || wait <= 0 {
		t.Fatalf("three loops of a (limit 2): %v %v %v, wait %v; want the third refused with a wait", ok1, ok2, ok3, wait)
	}
	if _, ok, _ := g.StartLoop(t.Context(), b); !ok {
		t.Fatal("b refused its first loop: keys must not share a count")
	}
	if _, ok, _ := g.StartLoop(t.Context(), b); ok {
		t.Error("b started a second loop past its own limit of 1")
	}
	r1()
	r1() // a second release must not free another slot
	if got := a.Loops(); got != 1 {
		t.Errorf("after one release (called twice), a has %d loops, want 1", got)
	}
	if _, ok, _ := g.StartLoop(t.Context(), a); !ok {
		t.Error("a refused after a loop of its ended")
	}
	if _, ok, _ := g.StartLoop(t.Context(), a); ok {
		t.Error("a started a loop past its limit after a double release")
	}
}

func TestStartSampleCap(t *testing.T) {
	g := mustGuard(t, Options{InFlightSamples: 3})
	var (
		mu       sync.Mutex
		releases []func()
		refused  int
		wg       sync.WaitGroup
	)
	for range 10 {
		wg.Go(func() {
			rel, ok, wait := g.StartSample()
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				if wait <= 0 {
					t.Error("refused without a wait")
				}
				refused++
				return
			}
			releases = append(releases, rel)
		})
	}
	wg.Wait()
	if len(releases) != 3 || refused != 7 || g.InFlight() != 3 {
		t.Fatalf("10 at once under a cap of 3: %d started, %d refused, %d in flight; want 3, 7, 3", len(releases), refused, g.InFlight())
	}
	for _, rel := range releases {
		rel()
	}
	if g.InFlight() != 0 {
		t.Errorf("%d in flight after every release", g.InFlight())
	}
	if _, ok, _ := g.StartSample(); !ok {
		t.Error("refused once the others were done")
	}
	if _, ok, _ := mustGuard(t, Options{}).StartSample(); !ok {
		t.Error("a zero cap refused a request: it means no cap")
	}
}

// BenchmarkAuthenticateAllow is the cost a keyed request pays: hashing
// the key, comparing it with 10 digests, and taking from the key's rate.
func BenchmarkAuthenticateAllow(b *testing.B) {
	var keys []Key
	for i := range 10 {
		keys = append(keys, Key{Name: strings.Repeat("k", i+1), Digest: HashKey(strings.Repeat("secret", i+1))})
	}
	g, err := New(Options{Keys: keys, RequestsPerMinute: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	header := "Bearer " + strings.Repeat("secret", 10)
	b.ReportAllocs()
	for b.Loop() {
		c, err := g.Authenticate(header)
		if err != nil {
			b.Fatal(err)
		}
		if ok, _ := g.Allow(b.Context(), c); !ok {
			b.Fatal("refused")
		}
	}
}
