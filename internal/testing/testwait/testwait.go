// Package testwait lets tests wait for what they need instead of sleeping
// a fixed time: a value on a channel, or a condition only a poll can see,
// such as the state of another process.
package testwait

import (
	"testing"
	"time"
)

// Timeout bounds a wait on a channel.
const Timeout = 10 * time.Second

// Recv returns the next value on ch (the zero value once ch is closed),
// failing t if none comes within Timeout.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waiting for %s: nothing within %s", what, Timeout)
		panic("unreachable")
	}
}

// Poll calls cond every interval until it holds, failing t after timeout.
func Poll(t testing.TB, every, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(every)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("waiting for %s: not within %s", what, timeout)
		}
	}
}
