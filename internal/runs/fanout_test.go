package runs_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/runs"
)

// drain reads sub to its end without waiting: every event it delivers
// must be buffered already.
func drain(t *testing.T, sub runs.Subscription) []int64 {
	t.Helper()
	var ids []int64
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return ids
			}
			ids = append(ids, ev.ID)
		default:
			t.Fatalf("the subscription is open after %v", ids)
		}
	}
}

// TestFanout: each subscription gets its replay, then the delivered events
// above its id, in order; one that falls more than its buffer behind is
// cut with ErrSlow while the others go on; the terminal event ends the
// rest; Len follows.
func TestFanout(t *testing.T) {
	var mu sync.Mutex
	f := runs.NewFanout(&mu)
	ev := func(id int64) runs.Event { return runs.Event{ID: id, Name: "e"} }
	ctx := t.Context()
	mu.Lock()
	fresh := f.Subscribe(ctx, 2, nil, 10)                           // after 2, replay none
	replayed := f.Subscribe(ctx, 0, []runs.Event{ev(1), ev(2)}, 10) // replay 1, 2
	slow := f.Subscribe(ctx, 2, nil, 1)                             // room for one live event
	ahead := f.Subscribe(ctx, 3, nil, 10)                           // after an id not reached yet
	if f.Len() != 4 {
		t.Errorf("Len %d; want 4", f.Len())
	}
	f.Deliver(ev(3), false)
	f.Deliver(ev(4), false)
	f.Deliver(ev(5), true)
	mu.Unlock()
	tests := []struct {
		name string
		sub  runs.Subscription
		want []int64
		err  error
	}{
		{"fresh", fresh, []int64{3, 4, 5}, nil},
		{"replayed", replayed, []int64{1, 2, 3, 4, 5}, nil},
		{"slow", slow, []int64{3}, runs.ErrSlow},
		{"ahead", ahead, []int64{4, 5}, nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, drain(t, tt.sub)); diff != "" {
			t.Errorf("%s: ids (-want +got):\n%s", tt.name, diff)
		}
		if err := tt.sub.Err(); !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("%s: Err() = %v, want %v", tt.name, err, tt.err)
		}
		tt.sub.Close() // after the end: nothing happens
	}
	mu.Lock()
	defer mu.Unlock()
	if f.Len() != 0 {
		t.Errorf("Len %d after the end; want 0", f.Len())
	}
}

// TestFanoutEnds: a subscription ends with its ctx, with Close, and with
// End's error; Ended delivers its replay and ends with its error.
func TestFanoutEnds(t *testing.T) {
	var mu sync.Mutex
	f := runs.NewFanout(&mu)
	ctx, cancel := context.WithCancel(t.Context())
	mu.Lock()
	byCtx := f.Subscribe(ctx, 0, nil, 1)
	byClose := f.Subscribe(t.Context(), 0, nil, 1)
	byEnd := f.Subscribe(t.Context(), 0, []runs.Event{{ID: 1}}, 1)
	mu.Unlock()
	cancel()
	byClose.Close()
	for _, sub := range []runs.Subscription{byCtx, byClose} {
		if _, ok := <-sub.Events(); ok || sub.Err() != nil {
			t.Errorf("ended by its ctx or Close: Err() = %v, want a closed channel and nil", sub.Err())
		}
	}
	mu.Lock()
	f.End(runs.ErrClosed)
	mu.Unlock()
	if ids := drain(t, byEnd); !cmp.Equal(ids, []int64{1}) || !errors.Is(byEnd.Err(), runs.ErrClosed) {
		t.Errorf("ended by End: %v, %v; want [1], ErrClosed", ids, byEnd.Err())
	}
	ended := runs.Ended([]runs.Event{{ID: 7}}, runs.ErrClosed)
	if ids := drain(t, ended); !cmp.Equal(ids, []int64{7}) || !errors.Is(ended.Err(), runs.ErrClosed) {
		t.Errorf("Ended: %v, %v; want [7], ErrClosed", ids, ended.Err())
	}
}
