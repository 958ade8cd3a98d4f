package redis

import (
	"testing"

	"github.com/sampled/sampled/internal/testing/storetest"
)

// TestConformance runs the runs.Store suite against a real redis-server.
// The suite's clock is the store's Now, by which the store's methods tell
// whether a finished run expired; Redis expires the keys by its own clock
// (TestRedisExpiresKeys). After each case every subscription the store
// kept is released and its live loops ended (Close waits for them).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) storetest.Subject {
		c := storetest.NewClock()
		s := New(newClient(t), Options{
			MaxEvents: o.MaxEvents, TTL: o.TTL, Buffer: o.Buffer, MaxBytes: o.MaxBytes,
			Summarize: o.Summarize, Prefix: prefix(), Now: c.Now,
		})
		t.Cleanup(func() {
			if n := liveSubs(s); n != 0 {
				t.Errorf("%d live subscriptions at the end, want 0", n)
			}
		})
		return storetest.Subject{Store: s, Advance: c.Advance}
	})
}

// liveSubs counts the live subscriptions of s's followers.
func liveSubs(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.followers {
		f.mu.Lock()
		n += f.fan.Len()
		f.mu.Unlock()
	}
	return n
}
