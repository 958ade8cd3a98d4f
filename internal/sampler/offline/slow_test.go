package offline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/sampler"
)

// fakeClock is an after func whose timers fire when the test says so.
type fakeClock struct {
	asked chan time.Duration
	fire  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{asked: make(chan time.Duration, 1), fire: make(chan time.Time)}
}

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.asked <- d
	return c.fire
}

type sampleResult struct {
	resp *sampler.Response
	err  error
}

// TestSlowWaitsThenAnswersAsDefault: the slow model waits SlowDelay on the
// provider's clock, and only then gives the default model's answer.
func TestSlowWaitsThenAnswersAsDefault(t *testing.T) {
	clock := newFakeClock()
	p := New(nil)
	p.after = clock.after
	req := &sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText("Name three rivers")}}
	done := make(chan sampleResult, 1)
	go func() {
		resp, err := p.Sample(context.Background(), req)
		done <- sampleResult{resp, err}
	}()
	select {
	case d := <-clock.asked:
		if d != SlowDelay {
			t.Errorf("waited %v, want %v", d, SlowDelay)
		}
	case r := <-done:
		t.Fatalf("answered without waiting: %+v", r)
	}
	select {
	case r := <-done:
		t.Fatalf("answered before its delay: %+v", r)
	default:
	}
	clock.fire <- time.Time{}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	def := *req
	def.Model = ModelDefault
	want, err := New(nil).Sample(context.Background(), &def)
	if err != nil {
		t.Fatal(err)
	}
	want.Model = ModelSlow
	if diff := cmp.Diff(want, got.resp); diff != "" {
		t.Errorf("slow's answer (-want +got):\n%s", diff)
	}
}

// TestSlowHonoursCancellation: a cancelled context ends the wait at once,
// with the context's error, whatever the clock does.
func TestSlowHonoursCancellation(t *testing.T) {
	clock := newFakeClock()
	p := New(nil)
	p.after = clock.after
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan sampleResult, 1)
	go func() {
		resp, err := p.Sample(ctx, &sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText("hi")}})
		done <- sampleResult{resp, err}
	}()
	<-clock.asked // waiting now
	cancel()
	got := <-done // the clock never fires
	if !errors.Is(got.err, context.Canceled) || got.resp != nil {
		t.Errorf("got %+v, want context.Canceled and no answer", got)
	}
}

// TestSlowRealClock: without a fake clock, one call takes SlowDelay.
func TestSlowRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("takes SlowDelay")
	}
	start := time.Now()
	if _, err := New(nil).Sample(context.Background(), &sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText("hi")}}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < SlowDelay {
		t.Errorf("took %v, want at least %v", took, SlowDelay)
	}
}
