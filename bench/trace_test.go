package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestTrace runs the tracing measurement, small, for sampled and for the
// floor gateway: every gateway in its own process, spans exported to the
// receiver (runTrace fails when none arrives), a summary line per mode. It
// asserts no timing.
func TestTrace(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("the measurement reads /proc")
	}
	summary := regexp.MustCompile(`(?m)^(plain|schema) +CPU/request off [0-9.]+µs on [0-9.]+µs: ×[0-9.]+; c=4 req/s ×[0-9.]+; c=1 p50 [+-][0-9]+µs$`)
	for _, floor := range []bool{false, true} {
		var out bytes.Buffer
		o := sideOptions{rounds: 1, n: 10, c: 4, d: 100 * time.Millisecond, floor: floor}
		if err := runTrace(t.Context(), o, &out); err != nil {
			t.Fatalf("floor %v: %v\n%s", floor, err, out.String())
		}
		if got := summary.FindAllString(out.String(), -1); len(got) != 2 {
			t.Errorf("floor %v: %d summary lines, want plain and schema:\n%s", floor, len(got), out.String())
		}
	}
}
