package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Memory is a Store.
var _ Store = (*Memory)(nil)

// clock is a settable clock for MemoryOptions.Now.
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

// data is the payload of event i.
func data(i int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
}

// appendN appends events from..to to run id, the last one terminal if
// terminal, and returns them.
func appendN(t testing.TB, m *Memory, id string, from, to int64, terminal bool) []Event {
	t.Helper()
	var evs []Event
	for i := from; i <= to; i++ {
		name := "tool.completed"
		if terminal && i == to {
			name = "loop.completed"
		}
		ev, err := m.Append(context.Background(), id, name, data(i), terminal && i == to)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// newRun creates run id with n events, the last one terminal if finished,
// and returns its log.
func newRun(t testing.TB, m *Memory, id string, n int64, finished bool) []Event {
	t.Helper()
	if err := m.Create(context.Background(), id, json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return appendN(t, m, id, 1, n, finished)
}

// drain reads a subscription until its channel closes.
func drain(s *Subscription) []Event {
	var evs []Event
	for ev := range s.Events() {
		evs = append(evs, *ev)
	}
	return evs
}

// read reads n events, failing if the channel closes first.
func read(t *testing.T, s *Subscription, n int) []Event {
	t.Helper()
	evs := make([]Event, 0, n)
	for range n {
		ev, ok := <-s.Events()
		if !ok {
			t.Fatalf("channel closed after %d of %d events (err %v)", len(evs), n, s.Err())
		}
		evs = append(evs, *ev)
	}
	return evs
}

// lines formats events one a line.
func lines(evs []Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d %s %s\n", ev.ID, ev.Name, ev.Data)
	}
	return b.String()
}

func ids(evs []Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// span returns the ids from..to, or nil when from > to.
func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// pick returns the events of log with these ids.
func pick(log []Event, want []int64) []Event {
	var out []Event
	for _, id := range want {
		out = append(out, log[id-1])
	}
	return out
}

func TestAppend(t *testing.T) {
	type step struct {
		run      string
		terminal bool
		wantID   int64
		wantErr  error
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "ids increase from 1",
			steps: []step{
				{run: "a", wantID: 1},
				{run: "a", wantID: 2},
				{run: "a", wantID: 3, terminal: true},
			},
		},
		{
			name: "ids are per run",
			steps: []step{
				{run: "a", wantID: 1},
				{run: "b", wantID: 1},
				{run: "a", wantID: 2},
				{run: "b", wantID: 2},
			},
		},
		{
			name: "append after terminal",
			steps: []step{
				{run: "a", wantID: 1, terminal: true},
				{run: "a", wantErr: ErrFinished},
				{run: "a", wantErr: ErrFinished, terminal: true},
				{run: "b", wantID: 1},
			},
		},
		{
			name:  "unknown run",
			steps: []step{{run: "nope", wantErr: ErrNotFound}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{})
			for _, id := range []string{"a", "b"} {
				if err := m.Create(t.Context(), id, nil); err != nil {
					t.Fatal(err)
				}
			}
			for i, st := range tt.steps {
				ev, err := m.Append(t.Context(), st.run, "tool.completed", data(int64(i)), st.terminal)
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("step %d: Append error %v, want %v", i, err, st.wantErr)
				}
				if err != nil {
					continue
				}
				want := Event{ID: st.wantID, Name: "tool.completed", Data: data(int64(i))}
				if diff := cmp.Diff(want, ev, ignoreWire); diff != "" {
					t.Errorf("step %d: Append (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		do      func(m *Memory) (json.RawMessage, error)
		want    json.RawMessage
		wantErr error
	}{
		{
			name: "as created",
			do: func(m *Memory) (json.RawMessage, error) {
				return m.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":1}`),
		},
		{
			name: "after SetSnapshot",
			do: func(m *Memory) (json.RawMessage, error) {
				if err := m.SetSnapshot(ctx, "a", json.RawMessage(`{"v":2}`)); err != nil {
					return nil, err
				}
				return m.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":2}`),
		},
		{
			name: "SetSnapshot after terminal",
			do: func(m *Memory) (json.RawMessage, error) {
				if _, err := m.Append(ctx, "a", "loop.completed", nil, true); err != nil {
					return nil, err
				}
				if err := m.SetSnapshot(ctx, "a", json.RawMessage(`{"v":3}`)); err != nil {
					return nil, err
				}
				return m.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":3}`),
		},
		{
			name: "stored and returned values are copies",
			do: func(m *Memory) (json.RawMessage, error) {
				in := json.RawMessage(`{"v":4}`)
				if err := m.SetSnapshot(ctx, "a", in); err != nil {
					return nil, err
				}
				in[5] = '9'
				out, err := m.Snapshot(ctx, "a")
				if err != nil {
					return nil, err
				}
				out[5] = '8'
				return m.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":4}`),
		},
		{
			name: "Create an existing id",
			do: func(m *Memory) (json.RawMessage, error) {
				return nil, m.Create(ctx, "a", nil)
			},
			wantErr: ErrExists,
		},
		{
			name: "Snapshot of an unknown id",
			do: func(m *Memory) (json.RawMessage, error) {
				return m.Snapshot(ctx, "nope")
			},
			wantErr: ErrNotFound,
		},
		{
			name: "SetSnapshot of an unknown id",
			do: func(m *Memory) (json.RawMessage, error) {
				return nil, m.SetSnapshot(ctx, "nope", nil)
			},
			wantErr: ErrNotFound,
		},
		{
			name: "Subscribe to an unknown id",
			do: func(m *Memory) (json.RawMessage, error) {
				_, err := m.Subscribe(ctx, "nope", 0)
				return nil, err
			},
			wantErr: ErrNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{})
			if err := m.Create(ctx, "a", json.RawMessage(`{"v":1}`)); err != nil {
				t.Fatal(err)
			}
			got, err := tt.do(m)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(string(tt.want), string(got)); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubscribeReplay(t *testing.T) {
	// Every run has events 1..5 when subscribed to. A running run then gets
	// 6..8, 8 terminal; a finished one ended with 5.
	tests := []struct {
		name     string
		finished bool
		after    int64
		want     []int64
	}{
		{name: "running/from 0", after: 0, want: span(1, 8)},
		{name: "running/negative is 0", after: -3, want: span(1, 8)},
		{name: "running/from 1", after: 1, want: span(2, 8)},
		{name: "running/from middle", after: 3, want: span(4, 8)},
		{name: "running/from last", after: 5, want: span(6, 8)},
		{name: "running/beyond last", after: 6, want: span(7, 8)},
		{name: "running/beyond terminal", after: 20, want: nil},
		{name: "finished/from 0", finished: true, after: 0, want: span(1, 5)},
		{name: "finished/from 1", finished: true, after: 1, want: span(2, 5)},
		{name: "finished/from middle", finished: true, after: 3, want: span(4, 5)},
		{name: "finished/from last", finished: true, after: 5, want: nil},
		{name: "finished/beyond last", finished: true, after: 9, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{})
			log := newRun(t, m, "r", 5, tt.finished)
			sub, err := m.Subscribe(t.Context(), "r", tt.after)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			// The replay is buffered before any live event exists.
			replay := read(t, sub, len(span(max(tt.after, 0)+1, 5)))
			if !tt.finished {
				if got, want := m.Subscribers(), 1; got != want {
					t.Errorf("Subscribers() = %d, want %d", got, want)
				}
				log = append(log, appendN(t, m, "r", 6, 8, true)...)
			}
			got := append(replay, drain(sub)...)
			if diff := cmp.Diff(tt.want, ids(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(pick(log, tt.want), got, cmpopts.EquateEmpty(), ignoreWire); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if err := sub.Err(); err != nil {
				t.Errorf("Err() = %v, want nil", err)
			}
			if got := m.Subscribers(); got != 0 {
				t.Errorf("Subscribers() = %d after the terminal event, want 0", got)
			}
		})
	}
}

func TestReconnect(t *testing.T) {
	const (
		total = 400
		// lead is how far the appender may run ahead of the reader, so
		// that reconnections race with appends up to the end.
		lead = 10
	)
	tests := []struct {
		name    string
		perConn int // events read before reconnecting
	}{
		{name: "1 per connection", perConn: 1},
		{name: "3 per connection", perConn: 3},
		{name: "7 per connection", perConn: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{})
			if err := m.Create(t.Context(), "r", nil); err != nil {
				t.Fatal(err)
			}
			var (
				mu       sync.Mutex
				progress int64 // the last id read; total once the reader is done
				advanced = sync.NewCond(&mu)
			)
			setProgress := func(id int64) {
				mu.Lock()
				progress = id
				mu.Unlock()
				advanced.Broadcast()
			}
			defer setProgress(total)

			logc := make(chan []Event, 1)
			go func() {
				var log []Event
				for i := int64(1); i <= total; i++ {
					mu.Lock()
					for progress < i-lead {
						advanced.Wait()
					}
					mu.Unlock()
					ev, err := m.Append(context.Background(), "r", "tool.completed", data(i), i == total)
					if err != nil {
						panic(err)
					}
					log = append(log, ev)
					runtime.Gosched() // let the reader interleave
				}
				logc <- log
			}()

			var got []Event
			var last int64
			conns := 0
			for done := false; !done; {
				sub, err := m.Subscribe(t.Context(), "r", last)
				if err != nil {
					t.Fatalf("Subscribe after %d: %v", last, err)
				}
				conns++
				for range tt.perConn {
					ev, ok := <-sub.Events()
					if !ok {
						if err := sub.Err(); err != nil {
							t.Fatalf("Err() = %v, want nil", err)
						}
						done = true
						break
					}
					got = append(got, *ev)
					last = ev.ID
					setProgress(last)
				}
				sub.Close()
			}
			log := <-logc
			if diff := cmp.Diff(log, got, ignoreWire); diff != "" {
				t.Errorf("events read over %d connections (-want +got):\n%s", conns, diff)
			}
			if want := total / tt.perConn; conns < want {
				t.Errorf("%d connections, want at least %d", conns, want)
			}
			if n := m.Subscribers(); n != 0 {
				t.Errorf("Subscribers() = %d, want 0", n)
			}
		})
	}
}

func TestConcurrentSubscribers(t *testing.T) {
	const (
		subscribers = 100
		total       = 200
	)
	tests := []struct {
		name string
		pre  int64 // events appended before the subscribers start
	}{
		{name: "subscribe before appends", pre: 0},
		{name: "subscribe while appending", pre: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{})
			log := newRun(t, m, "r", tt.pre, false)
			var wg sync.WaitGroup
			results := make([][]Event, subscribers)
			errs := make([]error, subscribers)
			for i := range subscribers {
				wg.Go(func() {
					sub, err := m.Subscribe(context.Background(), "r", 0)
					if err != nil {
						errs[i] = err
						return
					}
					defer sub.Close()
					results[i] = drain(sub)
					errs[i] = sub.Err()
				})
			}
			log = append(log, appendN(t, m, "r", tt.pre+1, total, true)...)
			wg.Wait()
			for i := range subscribers {
				if errs[i] != nil {
					t.Errorf("subscriber %d: %v", i, errs[i])
				}
				// As text: 100 reflective diffs of 200 events are slow under -race.
				if diff := cmp.Diff(lines(log), lines(results[i])); diff != "" {
					t.Errorf("subscriber %d (-want +got):\n%s", i, diff)
				}
			}
			if n := m.Subscribers(); n != 0 {
				t.Errorf("Subscribers() = %d, want 0", n)
			}
		})
	}
}

func TestSlowSubscriber(t *testing.T) {
	tests := []struct {
		name   string
		buffer int
	}{
		{name: "buffer 1", buffer: 1},
		{name: "buffer 4", buffer: 4},
		{name: "buffer 16", buffer: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total := int64(2*tt.buffer + 3) // the last one terminal
			m := NewMemory(MemoryOptions{Buffer: tt.buffer})
			if err := m.Create(t.Context(), "r", nil); err != nil {
				t.Fatal(err)
			}
			slow, err := m.Subscribe(t.Context(), "r", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			fast, err := m.Subscribe(t.Context(), "r", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fast.Close()
			// The fast subscriber hands over each event; the test waits for
			// it before the next Append, so it never lags.
			got := make(chan Event)
			go func() {
				defer close(got)
				for ev := range fast.Events() {
					got <- *ev
				}
			}()

			var log, fastGot []Event
			for i := int64(1); i < total; i++ {
				ev, err := m.Append(t.Context(), "r", "tool.completed", data(i), false)
				if err != nil {
					t.Fatal(err)
				}
				log = append(log, ev)
				fastGot = append(fastGot, <-got)
				wantSubs := 2
				if i > int64(tt.buffer) {
					wantSubs = 1
				}
				if n := m.Subscribers(); n != wantSubs {
					t.Fatalf("after %d events: Subscribers() = %d, want %d", i, n, wantSubs)
				}
			}

			slowGot := drain(slow)
			if diff := cmp.Diff(span(1, int64(tt.buffer)), ids(slowGot)); diff != "" {
				t.Errorf("slow subscriber ids (-want +got):\n%s", diff)
			}
			if err := slow.Err(); !errors.Is(err, ErrSlow) {
				t.Errorf("slow Err() = %v, want ErrSlow", err)
			}

			// The dropped subscriber resumes by id.
			resumed, err := m.Subscribe(t.Context(), "r", slowGot[len(slowGot)-1].ID)
			if err != nil {
				t.Fatal(err)
			}
			defer resumed.Close()
			ev, err := m.Append(t.Context(), "r", "loop.completed", data(total), true)
			if err != nil {
				t.Fatal(err)
			}
			log = append(log, ev)
			for ev := range got {
				fastGot = append(fastGot, ev)
			}

			if diff := cmp.Diff(log, fastGot, ignoreWire); diff != "" {
				t.Errorf("fast subscriber (-want +got):\n%s", diff)
			}
			if err := fast.Err(); err != nil {
				t.Errorf("fast Err() = %v, want nil", err)
			}
			if diff := cmp.Diff(log, append(slowGot, drain(resumed)...), ignoreWire); diff != "" {
				t.Errorf("slow subscriber, dropped then resumed (-want +got):\n%s", diff)
			}
			if err := resumed.Err(); err != nil {
				t.Errorf("resumed Err() = %v, want nil", err)
			}
			if n := m.Subscribers(); n != 0 {
				t.Errorf("Subscribers() = %d, want 0", n)
			}
		})
	}
}

func TestSubscriptionEnd(t *testing.T) {
	tests := []struct {
		name string
		// run subscribes with ctx, ends the subscription somehow and returns
		// the events the subscriber read or found buffered.
		run     func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event
		want    []int64
		wantErr error // from Subscribe
	}{
		{
			name: "ctx cancelled before any event",
			run: func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event {
				sub := subscribe(t, m, ctx, 0)
				cancel()
				return drain(sub)
			},
		},
		{
			name: "ctx cancelled after reading",
			run: func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event {
				sub := subscribe(t, m, ctx, 0)
				appendN(t, m, "r", 1, 3, false)
				got := read(t, sub, 3)
				cancel()
				got = append(got, drain(sub)...)
				appendN(t, m, "r", 4, 5, false) // not delivered, no panic
				return got
			},
			want: span(1, 3),
		},
		{
			name: "buffered events stay readable after cancel",
			run: func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event {
				sub := subscribe(t, m, ctx, 0)
				appendN(t, m, "r", 1, 3, false)
				cancel()
				got := drain(sub)
				appendN(t, m, "r", 4, 5, false)
				return got
			},
			want: span(1, 3),
		},
		{
			name: "ctx done before Subscribe",
			run: func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event {
				cancel()
				_, err := m.Subscribe(ctx, "r", 0)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Subscribe error %v, want context.Canceled", err)
				}
				return nil
			},
		},
		{
			name: "Close twice",
			run: func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event {
				sub := subscribe(t, m, ctx, 0)
				appendN(t, m, "r", 1, 2, false)
				sub.Close()
				sub.Close()
				got := drain(sub)
				cancel()
				return got
			},
			want: span(1, 2),
		},
		{
			name: "Close then cancel then Close",
			run: func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event {
				sub := subscribe(t, m, ctx, 0)
				sub.Close()
				cancel()
				sub.Close()
				return drain(sub)
			},
		},
		{
			name: "Memory.Close ends every subscription",
			run: func(t *testing.T, m *Memory, ctx context.Context, cancel context.CancelFunc) []Event {
				defer cancel()
				a, b := subscribe(t, m, ctx, 0), subscribe(t, m, context.Background(), 0)
				appendN(t, m, "r", 1, 1, false)
				m.Close()
				got := append(drain(a), drain(b)...)
				// The store stays usable.
				appendN(t, m, "r", 2, 2, true)
				return append(got, drain(subscribe(t, m, ctx, 1))...)
			},
			want: []int64{1, 1, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{})
			if err := m.Create(t.Context(), "r", nil); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			got := tt.run(t, m, ctx, cancel)
			if diff := cmp.Diff(tt.want, ids(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if n := m.Subscribers(); n != 0 {
				t.Errorf("Subscribers() = %d, want 0", n)
			}
		})
	}
}

// subscribe subscribes to run "r", ending the subscription with the test.
func subscribe(t *testing.T, m *Memory, ctx context.Context, after int64) *Subscription {
	t.Helper()
	sub, err := m.Subscribe(ctx, "r", after)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return sub
}

func TestMaxEvents(t *testing.T) {
	// MaxEvents 5 and 12 events: 8..12 are kept. A running run then gets
	// 13, terminal.
	tests := []struct {
		name     string
		finished bool
		after    int64
		want     []int64
		wantErr  error
	}{
		{name: "running/from 0", after: 0, wantErr: ErrExpired},
		{name: "running/just before the window", after: 6, wantErr: ErrExpired},
		{name: "running/window start", after: 7, want: span(8, 13)},
		{name: "running/inside the window", after: 10, want: span(11, 13)},
		{name: "running/from last", after: 12, want: []int64{13}},
		{name: "finished/from 0", finished: true, after: 0, wantErr: ErrExpired},
		{name: "finished/just before the window", finished: true, after: 6, wantErr: ErrExpired},
		{name: "finished/window start", finished: true, after: 7, want: span(8, 12)},
		{name: "finished/from last", finished: true, after: 12, want: nil},
		{name: "finished/beyond last", finished: true, after: 30, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory(MemoryOptions{MaxEvents: 5})
			log := newRun(t, m, "r", 12, tt.finished)
			if n := len(m.runs["r"].events); n != 5 {
				t.Errorf("%d events retained, want 5", n)
			}
			sub, err := m.Subscribe(t.Context(), "r", tt.after)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Subscribe error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer sub.Close()
			if !tt.finished {
				log = append(log, appendN(t, m, "r", 13, 13, true)...)
			}
			got := drain(sub)
			if diff := cmp.Diff(pick(log, tt.want), got, cmpopts.EquateEmpty(), ignoreWire); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTTL(t *testing.T) {
	const ttl = time.Minute
	tests := []struct {
		name          string
		finished      bool
		advance       time.Duration
		wantErr       error // from Snapshot, SetSnapshot and Subscribe
		wantAppendErr error
	}{
		{name: "finished/just before TTL", finished: true, advance: ttl - time.Nanosecond, wantAppendErr: ErrFinished},
		{name: "finished/at TTL", finished: true, advance: ttl, wantErr: ErrNotFound, wantAppendErr: ErrNotFound},
		{name: "finished/long after", finished: true, advance: 100 * ttl, wantErr: ErrNotFound, wantAppendErr: ErrNotFound},
		{name: "running/never expires", advance: 1000 * ttl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			m := NewMemory(MemoryOptions{TTL: ttl, Now: c.Now})
			newRun(t, m, "r", 3, tt.finished)
			c.Advance(tt.advance)

			_, err := m.Snapshot(t.Context(), "r")
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Snapshot error %v, want %v", err, tt.wantErr)
			}
			if err := m.SetSnapshot(t.Context(), "r", nil); !errors.Is(err, tt.wantErr) {
				t.Errorf("SetSnapshot error %v, want %v", err, tt.wantErr)
			}
			sub, err := m.Subscribe(t.Context(), "r", 3)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Subscribe error %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				sub.Close()
			}
			if _, err := m.Append(t.Context(), "r", "tool.completed", nil, false); !errors.Is(err, tt.wantAppendErr) {
				t.Errorf("Append error %v, want %v", err, tt.wantAppendErr)
			}
			// An expired id can be created again; a kept one cannot.
			wantCreateErr := ErrExists
			if tt.wantErr != nil {
				wantCreateErr = nil
			}
			if err := m.Create(t.Context(), "r", nil); !errors.Is(err, wantCreateErr) {
				t.Errorf("Create error %v, want %v", err, wantCreateErr)
			}
		})
	}
}

func TestSweep(t *testing.T) {
	const ttl = time.Minute
	c := newClock()
	m := NewMemory(MemoryOptions{TTL: ttl, Now: c.Now})
	newRun(t, m, "a", 1, true) // expires at 1m
	c.Advance(10 * time.Second)
	newRun(t, m, "b", 1, true) // expires at 1m10s
	newRun(t, m, "c", 1, false)

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
			do:      func() error { _, err := m.Append(t.Context(), "c", "x", nil, false); return err },
			want:    []string{"a", "b", "c"},
		},
		{
			name:    "Append sweeps",
			advance: 5 * time.Second, // at 1m
			do:      func() error { _, err := m.Append(t.Context(), "c", "x", nil, false); return err },
			want:    []string{"b", "c"},
		},
		{
			name:    "Create sweeps",
			advance: 10 * time.Second, // at 1m10s
			do:      func() error { return m.Create(t.Context(), "d", nil) },
			want:    []string{"c", "d"},
		},
		{
			name:    "running runs stay",
			advance: 1000 * ttl,
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

// ignoreWire compares Events by their exported fields: the memo of Wire is
// no part of an event's value.
var ignoreWire = cmpopts.IgnoreUnexported(Event{})

// TestWireEncodesOnce: every subscriber of a run gets the log's own Event,
// whose Wire encodes once and hands every later caller the same bytes.
func TestWireEncodesOnce(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	ctx := context.Background()
	if err := m.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	subs := make([]*Subscription, 3)
	for i := range subs {
		s, err := m.Subscribe(ctx, "r", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs[i] = s
	}
	if _, err := m.Append(ctx, "r", "e", json.RawMessage(`{"n":1}`), false); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	encode := func(ev *Event) []byte {
		calls.Add(1)
		return fmt.Appendf(nil, "%d %s %s", ev.ID, ev.Name, ev.Data)
	}
	var wg sync.WaitGroup
	got := make([][]byte, len(subs))
	for i, s := range subs {
		wg.Go(func() { got[i] = (<-s.Events()).Wire(encode) })
	}
	wg.Wait()
	for i, b := range got {
		if string(b) != `1 e {"n":1}` {
			t.Fatalf("subscriber %d: %q", i, b)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("encode called %d times for one event, want 1", n)
	}
	// An Event made by hand has no memo: Wire encodes it each time.
	ev := &Event{ID: 7, Name: "x"}
	ev.Wire(encode)
	ev.Wire(encode)
	if n := calls.Load(); n != 3 {
		t.Fatalf("encode called %d times in all, want 3", n)
	}
}

// TestDropsAmidDelivery: subscriptions dropped while an event is being
// delivered (too slow, or the subscriber after an id not reached yet on the
// terminal event) do not make Append skip or repeat anyone else.
func TestDropsAmidDelivery(t *testing.T) {
	const subscribers, events, buffer = 60, 8, 2
	m := NewMemory(MemoryOptions{Buffer: buffer})
	ctx := context.Background()
	if err := m.Create(ctx, "r", nil); err != nil {
		t.Fatal(err)
	}
	subs := make([]*Subscription, subscribers)
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
		if _, err := m.Append(ctx, "r", "e", nil, e == events); err != nil {
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
		for ev := range s.Events() { // closed: dropped or the run ended
			got[i] = append(got[i], ev.ID)
		}
		var want []int64
		var wantErr error
		switch {
		case i%5 == 4:
			// nothing: closed at the end with no event
		case slow(i):
			want, wantErr = span(1, buffer), ErrSlow
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
	if n := m.Subscribers(); n != 0 {
		t.Errorf("%d subscribers left after the terminal event", n)
	}
}
