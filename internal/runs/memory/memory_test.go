package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/testing/storetest"
)

// TestConformance runs the runs.Store suite. After each case every
// subscription the store kept is released.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) storetest.Subject {
		c := storetest.NewClock()
		m := New(Options{MaxEvents: o.MaxEvents, TTL: o.TTL, Buffer: o.Buffer, MaxBytes: o.MaxBytes, Summarize: o.Summarize, Now: c.Now})
		t.Cleanup(func() {
			if n := liveSubs(m); n != 0 {
				t.Errorf("%d live subscriptions at the end, want 0", n)
			}
		})
		return storetest.Subject{Store: m, Advance: c.Advance}
	})
}

// liveSubs counts the live subscriptions of m's runs.
func liveSubs(m *Store) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, r := range m.runs {
		r.mu.Lock()
		n += r.fan.Len()
		r.mu.Unlock()
	}
	return n
}

// data is the payload of event i.
func data(i int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
}

// newRun creates run id with n events, the last one terminal if finished.
func newRun(t testing.TB, m *Store, id string, n int64, finished bool) {
	t.Helper()
	if err := m.Create(context.Background(), id, json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	for i := int64(1); i <= n; i++ {
		var err error
		if finished && i == n {
			_, err = m.Finish(context.Background(), id, "loop.completed", data(i), nil)
		} else {
			_, err = m.Append(context.Background(), id, "tool.completed", data(i))
		}
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
}

// drain reads a subscription until its channel closes; a Store closes it
// at once when the subscription ends.
func drain(s runs.Subscription) []int64 {
	var ids []int64
	for ev := range s.Events() {
		ids = append(ids, ev.ID)
	}
	return ids
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestDeliveredByAppend: Append has put the event in every subscription's
// channel, or cut the subscription, by the time it returns; a slow
// subscriber gets exactly Buffer live events, and events buffered before
// a subscription ended stay readable.
func TestDeliveredByAppend(t *testing.T) {
	const buffer = 3
	ctx := context.Background()
	m := New(Options{Buffer: buffer})
	newRun(t, m, "r", 2, false)
	slow, err := m.Subscribe(ctx, "r", 0) // holds the replay of 2, then 3 live events
	if err != nil {
		t.Fatal(err)
	}
	closed, err := m.Subscribe(ctx, "r", 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(3); i <= 6; i++ {
		if _, err := m.Append(ctx, "r", "tool.completed", data(i)); err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			closed.Close()
		}
		wantSubs := 2
		switch {
		case i >= 6:
			wantSubs = 0
		case i >= 4:
			wantSubs = 1
		}
		if n := liveSubs(m); n != wantSubs {
			t.Errorf("after event %d: %d live subscriptions, want %d", i, n, wantSubs)
		}
	}
	if diff := cmp.Diff(span(1, 2+buffer), drain(slow)); diff != "" {
		t.Errorf("slow subscriber (-want +got):\n%s", diff)
	}
	if err := slow.Err(); !errors.Is(err, runs.ErrSlow) {
		t.Errorf("slow Err() = %v, want ErrSlow", err)
	}
	if diff := cmp.Diff(span(3, 4), drain(closed)); diff != "" {
		t.Errorf("subscriber closed after event 4 (-want +got):\n%s", diff)
	}
	if err := closed.Err(); err != nil {
		t.Errorf("closed Err() = %v, want nil", err)
	}
}

// TestDropsAmidDelivery: subscriptions dropped while an event is being
// delivered (too slow, or the subscriber after an id not reached yet on the
// terminal event) do not make Append skip or repeat anyone else.
func TestDropsAmidDelivery(t *testing.T) {
	const subscribers, events, buffer = 60, 8, 2
	m := New(Options{Buffer: buffer})
	ctx := context.Background()
	if err := m.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	subs := make([]runs.Subscription, subscribers)
	for i := range subs {
		after := int64(0)
		if i%5 == 4 {
			after = 100 // waits for an id the run never reaches
		}
		s, err := m.Subscribe(ctx, "r", after)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	slow := func(i int) bool { return i%3 == 0 } // never reads while the run goes on
	got := make([][]int64, subscribers)
	for e := 1; e <= events; e++ {
		var err error
		if e == events {
			_, err = m.Finish(ctx, "r", "e", nil, nil)
		} else {
			_, err = m.Append(ctx, "r", "e", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range subs {
			if slow(i) {
				continue
			}
			for len(s.Events()) > 0 {
				got[i] = append(got[i], (<-s.Events()).ID)
			}
		}
	}
	for i, s := range subs {
		got[i] = append(got[i], drain(s)...) // closed: dropped or the run ended
		var want []int64
		var wantErr error
		switch {
		case i%5 == 4:
			want = []int64{events} // only the terminal event
		case slow(i):
			want, wantErr = span(1, buffer), runs.ErrSlow
		default:
			want = span(1, events)
		}
		if diff := cmp.Diff(want, got[i], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("subscriber %d: ids (-want +got):\n%s", i, diff)
		}
		if err := s.Err(); !errors.Is(err, wantErr) || (wantErr == nil && err != nil) {
			t.Errorf("subscriber %d: Err() = %v, want %v", i, err, wantErr)
		}
	}
	if n := liveSubs(m); n != 0 {
		t.Errorf("%d subscribers left after the terminal event", n)
	}
}

// TestBoundedLog: however many events a run gets, its log holds MaxEvents
// of them in an array of bounded size.
func TestBoundedLog(t *testing.T) {
	const maxEvents = 100
	m := New(Options{MaxEvents: maxEvents})
	newRun(t, m, "r", 100*maxEvents, false)
	r := m.runs["r"]
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, c := len(r.events), cap(r.events); n != maxEvents || c > 2*maxEvents+16 {
		t.Errorf("log of %d events in an array of %d, want %d in at most %d", n, c, maxEvents, 2*maxEvents+16)
	}
	if first := r.events[0].ID; first != 99*maxEvents+1 {
		t.Errorf("oldest kept id %d, want %d", first, 99*maxEvents+1)
	}
}

// TestSweep: expired runs are removed from the map by Create, Append and
// Finish, not only when they are accessed.
func TestSweep(t *testing.T) {
	const ttl = time.Minute
	c := storetest.NewClock()
	m := New(Options{TTL: ttl, Now: c.Now})
	newRun(t, m, "a", 1, true) // expires at 1m
	c.Advance(10 * time.Second)
	newRun(t, m, "b", 1, true) // expires at 1m10s
	newRun(t, m, "c", 1, false)
	newRun(t, m, "f", 1, false)

	keys := func() []string {
		m.mu.RLock()
		defer m.mu.RUnlock()
		var out []string
		for k := range m.runs {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name    string
		advance time.Duration
		do      func() error
		want    []string
	}{
		{
			name:    "nothing expired yet",
			advance: 45 * time.Second, // at 55s
			do:      func() error { _, err := m.Append(t.Context(), "c", "x", nil); return err },
			want:    []string{"a", "b", "c", "f"},
		},
		{
			name:    "Append sweeps",
			advance: 5 * time.Second, // at 1m
			do:      func() error { _, err := m.Append(t.Context(), "c", "x", nil); return err },
			want:    []string{"b", "c", "f"},
		},
		{
			name:    "Create sweeps",
			advance: 10 * time.Second, // at 1m10s
			do:      func() error { return m.Create(t.Context(), "d", nil) },
			want:    []string{"c", "d", "f"},
		},
		{
			name:    "Finish sweeps; running runs stay",
			advance: 1000 * ttl,
			do:      func() error { _, err := m.Finish(t.Context(), "f", "x", nil, nil); return err },
			want:    []string{"c", "d", "f"},
		},
		{
			name:    "finished at the last step, expired now",
			advance: ttl,
			do:      func() error { return m.Create(t.Context(), "e", nil) },
			want:    []string{"c", "d", "e"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Advance(tt.advance)
			if err := tt.do(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, keys()); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
	if n := len(m.expiries); n != 0 {
		t.Errorf("%d expiries queued, want 0", n)
	}
}
