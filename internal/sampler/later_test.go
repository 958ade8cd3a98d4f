package sampler

import (
	"context"
	"slices"
	"sync"
	"testing"
)

func TestAfterAnswerWaitsForRunThenRunsAtOnce(t *testing.T) {
	var l Later
	ctx := WithLater(context.Background(), &l)
	var ran []int
	for i := range 3 { // more than Later keeps without growing
		AfterAnswer(ctx, func() { ran = append(ran, i) })
	}
	if len(ran) != 0 {
		t.Fatalf("ran %v before Run", ran)
	}
	l.Run()
	if !slices.Equal(ran, []int{0, 1, 2}) {
		t.Fatalf("Run ran %v, want 0, 1, 2 in order", ran)
	}
	AfterAnswer(ctx, func() { ran = append(ran, 3) })
	if !slices.Equal(ran, []int{0, 1, 2, 3}) {
		t.Errorf("after Run, work ran %v; want it at once", ran)
	}
	l.Run() // a second Run runs nothing again
	if len(ran) != 4 {
		t.Errorf("a second Run ran %v", ran)
	}
}

func TestAfterAnswerWithoutLaterRunsAtOnce(t *testing.T) {
	ran := false
	AfterAnswer(context.Background(), func() { ran = true })
	if !ran {
		t.Error("work with no Later in the context did not run at once")
	}
}

// A loop started by a request keeps the request's context values, its
// Later too, and samples while the request's handler runs what waits.
func TestAfterAnswerConcurrentWithRun(t *testing.T) {
	var l Later
	ctx := WithLater(context.Background(), &l)
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				AfterAnswer(ctx, func() { mu.Lock(); n++; mu.Unlock() })
			}
		})
	}
	l.Run()
	wg.Wait()
	if n != 400 {
		t.Errorf("%d of 400 ran", n)
	}
}

func TestLaterHoldsABoundedNumber(t *testing.T) {
	var l Later
	ctx := WithLater(context.Background(), &l)
	ran := 0
	for range maxHeld + 5 {
		AfterAnswer(ctx, func() { ran++ })
	}
	if ran != 5 {
		t.Errorf("%d ran at once, want the 5 past the bound of %d", ran, maxHeld)
	}
	l.Run()
	if ran != maxHeld+5 {
		t.Errorf("%d ran in all, want %d", ran, maxHeld+5)
	}
}
