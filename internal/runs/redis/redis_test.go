package redis

import (
	"sync"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/runs/storetest"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestConformance runs the runs.Store suite against a real redis-server.
// The suite's clock is the store's Now, by which the store's methods tell
// whether a finished run expired; Redis expires the keys by its own clock
// (TestRedisExpiresKeys). After each case every subscription the store
// kept is released and its live loops ended (Close waits for them).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) storetest.Subject {
		c := newClock()
		s := New(newClient(t), Options{
			MaxEvents: o.MaxEvents, TTL: o.TTL, Buffer: o.Buffer,
			Prefix: prefix(), Now: c.Now,
		})
		t.Cleanup(func() {
			if n := s.Subscribers(); n != 0 {
				t.Errorf("Subscribers() = %d at the end, want 0", n)
			}
		})
		return storetest.Subject{Store: s, Advance: c.Advance}
	})
}
