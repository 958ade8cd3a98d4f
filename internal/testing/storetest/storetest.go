// Package storetest is the conformance suite of runs.Store: every backend
// passes it, unchanged. It uses nothing but the runs.Store interface, and
// makes no assumption about when a backend delivers an event, only about
// what it delivers: run it with -race.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sampled/sampled/internal/runs"
)

// Clock is a settable clock for a store's Now, shared by the suite and a
// backend's own tests.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at a fixed time.
func NewClock() *Clock {
	return &Clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Options are the limits a store under test is made with.
type Options struct {
	// MaxEvents is the number of a run's latest events the store keeps.
	MaxEvents int
	// TTL is how long the store keeps a finished run.
	TTL time.Duration
	// Buffer is how many live events a subscriber may fall behind before
	// the store cuts it with runs.ErrSlow.
	Buffer int
	// MaxBytes caps the bytes of the runs the store keeps; 0 means the
	// store's default.
	MaxBytes int64
	// Summarize makes the summaries List gives; nil keeps the snapshots.
	Summarize runs.Summarize
}

// Subject is a store under test and its clock.
type Subject struct {
	// Store is new and empty. The suite closes it.
	Store runs.Store
	// Advance moves the clock by which Store expires runs forward by d.
	Advance func(d time.Duration)
}

// NewStore returns a new, empty store made with o.
type NewStore func(t *testing.T, o Options) Subject

// wait bounds every wait for a store: a guard against hangs on a busy
// machine, not a performance bound.
const wait = 30 * time.Second

// Run runs the suite against the stores newStore makes.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, newStore NewStore)
	}{
		{"Append", testAppend},
		{"Snapshot", testSnapshot},
		{"ReplayAfterAnyID", testReplayAfterAnyID},
		{"LiveFollow", testLiveFollow},
		{"Reconnect", testReconnect},
		{"ConcurrentAppendsAndSubscribers", testConcurrent},
		{"SlowSubscriber", testSlowSubscriber},
		{"SubscriptionEnd", testSubscriptionEnd},
		{"Cancel", testCancel},
		{"TTL", testTTL},
		{"LogCap", testLogCap},
		{"List", testList},
		{"ListSummaries", testListSummaries},
		{"SizeCap", testSizeCap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newStore) })
	}
}

// open makes a store with o, closed with the test.
func open(t *testing.T, newStore NewStore, o Options) Subject {
	t.Helper()
	if o.MaxEvents == 0 {
		o.MaxEvents = 10000
	}
	if o.TTL == 0 {
		o.TTL = time.Hour
	}
	if o.Buffer == 0 {
		o.Buffer = 256
	}
	s := newStore(t, o)
	t.Cleanup(func() {
		if err := s.Store.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// data is the payload of event i.
func data(i int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
}

// create creates run id, failing the test on an error.
func create(t *testing.T, s runs.Store, id string) {
	t.Helper()
	if err := s.Create(context.Background(), id, json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatalf("Create %q: %v", id, err)
	}
}

// appendN appends events from..to to run id, the last one the terminal
// event if finish, and returns them as Append and Finish returned them.
func appendN(t *testing.T, s runs.Store, id string, from, to int64, finish bool) []runs.Event {
	t.Helper()
	var evs []runs.Event
	for i := from; i <= to; i++ {
		var (
			ev  runs.Event
			err error
		)
		if finish && i == to {
			ev, err = s.Finish(context.Background(), id, "loop.completed", data(i), nil)
		} else {
			ev, err = s.Append(context.Background(), id, "tool.completed", data(i))
		}
		if err != nil {
			t.Fatalf("event %d of %q: %v", i, id, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// newRun creates run id with n events, the last one terminal if finished,
// and returns its log.
func newRun(t *testing.T, s runs.Store, id string, n int64, finished bool) []runs.Event {
	t.Helper()
	create(t, s, id)
	return appendN(t, s, id, 1, n, finished)
}

// subscribe subscribes to run id after an id, ending the subscription with
// the test.
func subscribe(t *testing.T, s runs.Store, ctx context.Context, id string, after int64) runs.Subscription {
	t.Helper()
	sub, err := s.Subscribe(ctx, id, after)
	if err != nil {
		t.Fatalf("Subscribe to %q after %d: %v", id, after, err)
	}
	t.Cleanup(sub.Close)
	return sub
}

// drain reads a subscription until its channel closes and returns what it
// read and Err.
func drain(t *testing.T, sub runs.Subscription) ([]runs.Event, error) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var evs []runs.Event
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return evs, sub.Err()
			}
			evs = append(evs, ev)
		case <-timer.C:
			t.Fatalf("the subscription did not end within %s (read %v)", wait, ids(evs))
		}
	}
}

// read reads n events, failing if the channel closes first.
func read(t *testing.T, sub runs.Subscription, n int) []runs.Event {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	evs := make([]runs.Event, 0, n)
	for len(evs) < n {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("channel closed after %d of %d events (err %v)", len(evs), n, sub.Err())
			}
			evs = append(evs, ev)
		case <-timer.C:
			t.Fatalf("%d of %d events within %s", len(evs), n, wait)
		}
	}
	return evs
}

// quiet fails if the subscription delivers anything, or ends, within d.
func quiet(t *testing.T, sub runs.Subscription, d time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		t.Fatalf("got %+v (open %v) while nothing was appended", ev, ok)
	case <-time.After(d):
	}
}

func ids(evs []runs.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// lines formats events one a line: a diff of many events as text is fast.
func lines(evs []runs.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d %s %s\n", ev.ID, ev.Name, ev.Data)
	}
	return b.String()
}

// span returns the ids from..to, or nil when from > to.
func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// pick returns the events of log with these ids; log holds ids 1..n.
func pick(log []runs.Event, want []int64) []runs.Event {
	var out []runs.Event
	for _, id := range want {
		out = append(out, log[id-1])
	}
	return out
}

func testAppend(t *testing.T, newStore NewStore) {
	type step struct {
		run     string
		finish  bool
		wantID  int64
		wantErr error
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
				{run: "a", wantID: 3, finish: true},
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
			name: "after the terminal event",
			steps: []step{
				{run: "a", wantID: 1, finish: true},
				{run: "a", wantErr: runs.ErrFinished},
				{run: "a", wantErr: runs.ErrFinished, finish: true},
				{run: "b", wantID: 1},
			},
		},
		{
			name:  "unknown run",
			steps: []step{{run: "nope", wantErr: runs.ErrNotFound}, {run: "nope", finish: true, wantErr: runs.ErrNotFound}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, newStore, Options{}).Store
			create(t, s, "a")
			create(t, s, "b")
			for i, st := range tt.steps {
				var (
					ev  runs.Event
					err error
				)
				if st.finish {
					ev, err = s.Finish(t.Context(), st.run, "loop.completed", data(int64(i)), nil)
				} else {
					ev, err = s.Append(t.Context(), st.run, "tool.completed", data(int64(i)))
				}
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("step %d: error %v, want %v", i, err, st.wantErr)
				}
				if err != nil {
					continue
				}
				want := runs.Event{ID: st.wantID, Name: "tool.completed", Data: data(int64(i))}
				if st.finish {
					want.Name = "loop.completed"
				}
				if diff := cmp.Diff(want, ev); diff != "" {
					t.Errorf("step %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
	t.Run("data is copied", func(t *testing.T) {
		s := open(t, newStore, Options{}).Store
		create(t, s, "a")
		in := json.RawMessage(`{"n":1}`)
		if _, err := s.Append(t.Context(), "a", "tool.completed", in); err != nil {
			t.Fatal(err)
		}
		in[5] = '9'
		got, _ := drain(t, finishAndSubscribe(t, s, "a"))
		if diff := cmp.Diff(`{"n":1}`, string(got[0].Data)); diff != "" {
			t.Errorf("data of event 1 (-want +got):\n%s", diff)
		}
	})
}

// finishAndSubscribe finishes run id and subscribes to it from the start.
func finishAndSubscribe(t *testing.T, s runs.Store, id string) runs.Subscription {
	t.Helper()
	if _, err := s.Finish(t.Context(), id, "loop.completed", nil, nil); err != nil {
		t.Fatal(err)
	}
	return subscribe(t, s, t.Context(), id, 0)
}

func testSnapshot(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	tests := []struct {
		name    string
		do      func(s runs.Store) (json.RawMessage, error)
		want    json.RawMessage
		wantErr error
	}{
		{
			name: "as created",
			do:   func(s runs.Store) (json.RawMessage, error) { return s.Snapshot(ctx, "a") },
			want: json.RawMessage(`{"v":1}`),
		},
		{
			name: "after SetSnapshot",
			do: func(s runs.Store) (json.RawMessage, error) {
				if err := s.SetSnapshot(ctx, "a", json.RawMessage(`{"v":2}`)); err != nil {
					return nil, err
				}
				return s.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":2}`),
		},
		{
			name: "Finish replaces it",
			do: func(s runs.Store) (json.RawMessage, error) {
				if _, err := s.Finish(ctx, "a", "loop.completed", nil, json.RawMessage(`{"v":3}`)); err != nil {
					return nil, err
				}
				return s.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":3}`),
		},
		{
			name: "Finish without one keeps it",
			do: func(s runs.Store) (json.RawMessage, error) {
				if _, err := s.Finish(ctx, "a", "loop.completed", nil, nil); err != nil {
					return nil, err
				}
				return s.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":1}`),
		},
		{
			name: "SetSnapshot after Finish",
			do: func(s runs.Store) (json.RawMessage, error) {
				if _, err := s.Finish(ctx, "a", "loop.completed", nil, json.RawMessage(`{"v":3}`)); err != nil {
					return nil, err
				}
				if err := s.SetSnapshot(ctx, "a", json.RawMessage(`{"v":4}`)); err != nil {
					return nil, err
				}
				return s.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":4}`),
		},
		{
			name: "stored and returned values are copies",
			do: func(s runs.Store) (json.RawMessage, error) {
				in := json.RawMessage(`{"v":5}`)
				if err := s.SetSnapshot(ctx, "a", in); err != nil {
					return nil, err
				}
				in[5] = '9'
				out, err := s.Snapshot(ctx, "a")
				if err != nil {
					return nil, err
				}
				out[5] = '8'
				return s.Snapshot(ctx, "a")
			},
			want: json.RawMessage(`{"v":5}`),
		},
		{
			name:    "Create an existing id",
			do:      func(s runs.Store) (json.RawMessage, error) { return nil, s.Create(ctx, "a", nil) },
			wantErr: runs.ErrExists,
		},
		{
			name:    "Snapshot of an unknown id",
			do:      func(s runs.Store) (json.RawMessage, error) { return s.Snapshot(ctx, "nope") },
			wantErr: runs.ErrNotFound,
		},
		{
			name:    "SetSnapshot of an unknown id",
			do:      func(s runs.Store) (json.RawMessage, error) { return nil, s.SetSnapshot(ctx, "nope", nil) },
			wantErr: runs.ErrNotFound,
		},
		{
			name: "Subscribe to an unknown id",
			do: func(s runs.Store) (json.RawMessage, error) {
				_, err := s.Subscribe(ctx, "nope", 0)
				return nil, err
			},
			wantErr: runs.ErrNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, newStore, Options{}).Store
			if err := s.Create(ctx, "a", json.RawMessage(`{"v":1}`)); err != nil {
				t.Fatal(err)
			}
			got, err := tt.do(s)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(string(tt.want), string(got)); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
		})
	}
}

// testReplayAfterAnyID subscribes after every id of a run's log, before
// and after the run finished: each subscription gets exactly the events
// after its id, then (while running) the live ones, and then ends; one
// after an id the run had not reached still gets the terminal event.
func testReplayAfterAnyID(t *testing.T, newStore NewStore) {
	const n, more = 6, 3 // events before subscribing; then appended live, the last terminal
	for _, finished := range []bool{false, true} {
		name := "running"
		if finished {
			name = "finished"
		}
		t.Run(name, func(t *testing.T) {
			s := open(t, newStore, Options{}).Store
			log := newRun(t, s, "r", n, finished)
			last := int64(n)
			if !finished {
				last += more
			}
			subs := make(map[int64]runs.Subscription)
			for after := int64(-2); after <= last+2; after++ {
				subs[after] = subscribe(t, s, t.Context(), "r", after)
			}
			if !finished {
				log = append(log, appendN(t, s, "r", n+1, n+more, true)...)
			}
			for after := int64(-2); after <= last+2; after++ {
				got, err := drain(t, subs[after])
				// A subscription after an id the run had not reached
				// when it subscribed ends with the terminal event all
				// the same.
				from := max(after, 0) + 1
				if after > last || (after == last && !finished) {
					from = last
				}
				want := pick(log, span(from, last))
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("after %d (-want +got):\n%s", after, diff)
				}
				if err != nil {
					t.Errorf("after %d: Err() = %v, want nil", after, err)
				}
			}
		})
	}
}

// testLiveFollow reads each event as it is appended.
func testLiveFollow(t *testing.T, newStore NewStore) {
	s := open(t, newStore, Options{}).Store
	create(t, s, "r")
	create(t, s, "other")
	sub := subscribe(t, s, t.Context(), "r", 0)
	quiet(t, sub, 20*time.Millisecond)
	for i := int64(1); i <= 5; i++ {
		want := appendN(t, s, "r", i, i, i == 5)
		appendN(t, s, "other", i, i, false) // not delivered to r's subscriber
		if diff := cmp.Diff(want, read(t, sub, 1)); diff != "" {
			t.Fatalf("event %d (-want +got):\n%s", i, diff)
		}
	}
	if rest, err := drain(t, sub); len(rest) != 0 || err != nil {
		t.Errorf("after the terminal event: %v, %v; want the end, nil", ids(rest), err)
	}
}

// testReconnect reads a run's log over many subscriptions, each resuming
// after the last id read, while events are appended: nothing is lost or
// repeated.
func testReconnect(t *testing.T, newStore NewStore) {
	const (
		total = 300
		// lead is how far the appender may run ahead of the reader, so
		// that reconnections race with appends up to the end.
		lead = 10
	)
	for _, perConn := range []int{1, 3, 7} {
		t.Run(fmt.Sprintf("%d per subscription", perConn), func(t *testing.T) {
			s := open(t, newStore, Options{}).Store
			create(t, s, "r")
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

			type result struct {
				log []runs.Event
				err error
			}
			logc := make(chan result, 1)
			go func() {
				var res result
				defer func() { logc <- res }()
				for i := int64(1); i <= total; i++ {
					mu.Lock()
					for progress < i-lead {
						advanced.Wait()
					}
					mu.Unlock()
					var ev runs.Event
					if i == total {
						ev, res.err = s.Finish(context.Background(), "r", "loop.completed", data(i), nil)
					} else {
						ev, res.err = s.Append(context.Background(), "r", "tool.completed", data(i))
					}
					if res.err != nil {
						return
					}
					res.log = append(res.log, ev)
				}
			}()

			var got []runs.Event
			var last int64
			subs := 0
			for done := false; !done; {
				sub, err := s.Subscribe(t.Context(), "r", last)
				if err != nil {
					t.Fatalf("Subscribe after %d: %v", last, err)
				}
				subs++
				for range perConn {
					evs, err := readOrEnd(t, sub)
					if evs == nil {
						if err != nil {
							t.Fatalf("Err() = %v, want nil", err)
						}
						done = true
						break
					}
					got = append(got, *evs)
					last = evs.ID
					setProgress(last)
				}
				sub.Close()
			}
			res := <-logc
			if res.err != nil {
				t.Fatal(res.err)
			}
			if diff := cmp.Diff(lines(res.log), lines(got)); diff != "" {
				t.Errorf("events read over %d subscriptions (-want +got):\n%s", subs, diff)
			}
			if want := total / perConn; subs < want {
				t.Errorf("%d subscriptions, want at least %d", subs, want)
			}
		})
	}
}

// readOrEnd reads one event; at the end of the subscription it returns nil
// and Err.
func readOrEnd(t *testing.T, sub runs.Subscription) (*runs.Event, error) {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if !ok {
			return nil, sub.Err()
		}
		return &ev, nil
	case <-time.After(wait):
		t.Fatalf("no event and no end within %s", wait)
		return nil, nil
	}
}

// testConcurrent appends to one run from several goroutines while
// subscribers join at different points; every subscriber gets the same
// log, whose ids are 1..n without gap, holding every appended event once.
func testConcurrent(t *testing.T, newStore NewStore) {
	const (
		appenders   = 4
		perAppender = 50
		subscribers = 50
	)
	s := open(t, newStore, Options{}).Store
	create(t, s, "r")
	// Other runs are written at the same time and must not interfere.
	create(t, s, "other")
	var wg sync.WaitGroup
	results := make([][]runs.Event, subscribers)
	errs := make([]error, subscribers)
	start := make(chan struct{})
	for i := range subscribers {
		wg.Go(func() {
			<-start
			sub, err := s.Subscribe(context.Background(), "r", 0)
			if err != nil {
				errs[i] = err
				return
			}
			defer sub.Close()
			timer := time.NewTimer(wait)
			defer timer.Stop()
			for {
				select {
				case ev, ok := <-sub.Events():
					if !ok {
						errs[i] = sub.Err()
						return
					}
					results[i] = append(results[i], ev)
				case <-timer.C:
					errs[i] = fmt.Errorf("no end within %s after %d events", wait, len(results[i]))
					return
				}
			}
		})
	}
	var appendWG sync.WaitGroup
	appended := make([][]runs.Event, appenders)
	appendErrs := make([]error, appenders)
	for a := range appenders {
		appendWG.Go(func() {
			<-start
			for i := range perAppender {
				ev, err := s.Append(context.Background(), "r", "tool.completed", json.RawMessage(fmt.Sprintf(`{"a":%d,"i":%d}`, a, i)))
				if err != nil {
					appendErrs[a] = err
					return
				}
				appended[a] = append(appended[a], ev)
				if _, err := s.Append(context.Background(), "other", "x", nil); err != nil {
					appendErrs[a] = err
					return
				}
			}
		})
	}
	close(start)
	appendWG.Wait()
	for _, err := range appendErrs {
		if err != nil {
			t.Fatal(err)
		}
	}
	end, err := s.Finish(t.Context(), "r", "loop.completed", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	// The log: what each Append returned, in id order.
	log := make([]runs.Event, appenders*perAppender)
	for a := range appenders {
		for i, ev := range appended[a] {
			if ev.ID < 1 || ev.ID > int64(len(log)) || log[ev.ID-1].ID != 0 {
				t.Fatalf("appender %d, event %d: id %d given twice or out of 1..%d", a, i, ev.ID, len(log))
			}
			log[ev.ID-1] = ev
		}
	}
	log = append(log, end)
	for i := range subscribers {
		if errs[i] != nil {
			t.Errorf("subscriber %d: %v", i, errs[i])
			continue
		}
		if diff := cmp.Diff(lines(log), lines(results[i])); diff != "" {
			t.Errorf("subscriber %d (-want +got):\n%s", i, diff)
		}
	}
}

// testSlowSubscriber: a subscriber that reads nothing while far more than
// Buffer events are appended is cut with ErrSlow, without holding up
// Append or a subscriber that keeps up; it resumes after the last id it
// read and gets the rest.
func testSlowSubscriber(t *testing.T, newStore NewStore) {
	for _, buffer := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("buffer %d", buffer), func(t *testing.T) {
			total := int64(4*buffer + 8) // the last one terminal
			s := open(t, newStore, Options{Buffer: buffer}).Store
			create(t, s, "r")
			slow := subscribe(t, s, t.Context(), "r", 0)
			fast := subscribe(t, s, t.Context(), "r", 0)
			var log, fastGot []runs.Event
			for i := int64(1); i < total; i++ {
				log = append(log, appendN(t, s, "r", i, i, false)...)
				// The fast subscriber reads each event before the next.
				fastGot = append(fastGot, read(t, fast, 1)...)
			}

			slowGot, err := drain(t, slow)
			if !errors.Is(err, runs.ErrSlow) {
				t.Fatalf("slow subscriber: Err() = %v after %v, want ErrSlow", err, ids(slowGot))
			}
			if diff := cmp.Diff(pick(log, span(1, int64(len(slowGot)))), slowGot, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("slow subscriber before the cut: not a prefix of the log (-want +got):\n%s", diff)
			}
			if len(slowGot) >= int(total-1) {
				t.Errorf("slow subscriber read all %d events before its cut", len(slowGot))
			}

			// The cut subscriber resumes by id.
			var lastRead int64
			if len(slowGot) > 0 {
				lastRead = slowGot[len(slowGot)-1].ID
			}
			resumed := subscribe(t, s, t.Context(), "r", lastRead)
			log = append(log, appendN(t, s, "r", total, total, true)...)
			fastRest, err := drain(t, fast)
			if err != nil {
				t.Errorf("fast subscriber: Err() = %v, want nil", err)
			}
			if diff := cmp.Diff(lines(log), lines(append(fastGot, fastRest...))); diff != "" {
				t.Errorf("fast subscriber (-want +got):\n%s", diff)
			}
			rest, err := drain(t, resumed)
			if err != nil {
				t.Errorf("resumed subscriber: Err() = %v, want nil", err)
			}
			if diff := cmp.Diff(lines(log), lines(append(slowGot, rest...))); diff != "" {
				t.Errorf("slow subscriber, cut then resumed (-want +got):\n%s", diff)
			}
		})
	}
}

// testSubscriptionEnd: the ways a subscription ends besides the terminal
// event.
func testSubscriptionEnd(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		// run subscribes to run "r" with ctx, ends the subscription somehow
		// and returns the events the subscriber read and the final Err.
		run     func(t *testing.T, s runs.Store, ctx context.Context, cancel context.CancelFunc) ([]runs.Event, error)
		want    []int64
		wantErr error
	}{
		{
			name: "ctx cancelled before any event",
			run: func(t *testing.T, s runs.Store, ctx context.Context, cancel context.CancelFunc) ([]runs.Event, error) {
				sub := subscribe(t, s, ctx, "r", 0)
				cancel()
				return drain(t, sub)
			},
		},
		{
			name: "ctx cancelled after reading",
			run: func(t *testing.T, s runs.Store, ctx context.Context, cancel context.CancelFunc) ([]runs.Event, error) {
				sub := subscribe(t, s, ctx, "r", 0)
				appendN(t, s, "r", 1, 3, false)
				got := read(t, sub, 3)
				cancel()
				rest, err := drain(t, sub)
				appendN(t, s, "r", 4, 5, false) // the run goes on
				return append(got, rest...), err
			},
			want: span(1, 3),
		},
		{
			name: "ctx done before Subscribe",
			run: func(t *testing.T, s runs.Store, ctx context.Context, cancel context.CancelFunc) ([]runs.Event, error) {
				cancel()
				_, err := s.Subscribe(ctx, "r", 0)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Subscribe error %v, want context.Canceled", err)
				}
				return nil, nil
			},
		},
		{
			name: "Close twice",
			run: func(t *testing.T, s runs.Store, ctx context.Context, cancel context.CancelFunc) ([]runs.Event, error) {
				sub := subscribe(t, s, ctx, "r", 0)
				appendN(t, s, "r", 1, 2, false)
				got := read(t, sub, 2)
				sub.Close()
				sub.Close()
				rest, err := drain(t, sub)
				return append(got, rest...), err
			},
			want: span(1, 2),
		},
		{
			name: "Close then cancel then Close",
			run: func(t *testing.T, s runs.Store, ctx context.Context, cancel context.CancelFunc) ([]runs.Event, error) {
				sub := subscribe(t, s, ctx, "r", 0)
				sub.Close()
				cancel()
				sub.Close()
				return drain(t, sub)
			},
		},
		{
			name: "the store closes",
			run: func(t *testing.T, s runs.Store, ctx context.Context, cancel context.CancelFunc) ([]runs.Event, error) {
				a, b := subscribe(t, s, ctx, "r", 0), subscribe(t, s, context.Background(), "r", 0)
				appendN(t, s, "r", 1, 1, false)
				got := append(read(t, a, 1), read(t, b, 1)...)
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				for _, sub := range []runs.Subscription{a, b} {
					rest, err := drain(t, sub)
					if len(rest) != 0 || !errors.Is(err, runs.ErrClosed) {
						t.Errorf("after Close: %v, %v; want the end, ErrClosed", ids(rest), err)
					}
				}
				// A subscription after Close is refused, or replays and
				// ends.
				sub, err := s.Subscribe(ctx, "r", 0)
				if err != nil {
					return got, err
				}
				defer sub.Close()
				rest, err := drain(t, sub)
				if diff := cmp.Diff(span(1, int64(len(rest))), ids(rest), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("a subscription after Close: not a replay (-want +got):\n%s", diff)
				}
				return got, err
			},
			want:    []int64{1, 1},
			wantErr: runs.ErrClosed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, newStore, Options{}).Store
			create(t, s, "r")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			got, err := tt.run(t, s, ctx, cancel)
			if diff := cmp.Diff(tt.want, ids(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("Err() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// isClosed reports whether ch is closed, waiting up to d for it.
func isClosed(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// testCancel: a request to cancel reaches whoever watches the run, whether
// it watched before or after the request; it is refused once the run
// finished.
func testCancel(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := open(t, newStore, Options{}).Store
	for _, id := range []string{"early", "late", "other", "done"} {
		create(t, s, id)
	}
	early, err := s.Cancelled(ctx, "early")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Cancelled(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if isClosed(early, 20*time.Millisecond) {
		t.Fatal("Cancelled is closed before Cancel")
	}
	for _, id := range []string{"early", "late", "late"} { // again: no error
		if err := s.Cancel(ctx, id); err != nil {
			t.Fatalf("Cancel %q: %v", id, err)
		}
	}
	if !isClosed(early, wait) {
		t.Error("a watch made before Cancel did not see it")
	}
	late, err := s.Cancelled(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	if !isClosed(late, wait) {
		t.Error("a watch made after Cancel did not see it")
	}
	if isClosed(other, 20*time.Millisecond) {
		t.Error("cancelling one run closed another's channel")
	}

	// Cancelling does not finish the run: its loop does, and after that
	// the run can no longer be cancelled.
	appendN(t, s, "early", 1, 2, true)
	appendN(t, s, "done", 1, 1, true)
	for _, c := range []struct {
		id   string
		want error
	}{
		{"early", runs.ErrFinished},
		{"done", runs.ErrFinished},
		{"other", nil},
		{"nope", runs.ErrNotFound},
	} {
		if err := s.Cancel(ctx, c.id); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("Cancel %q = %v, want %v", c.id, err, c.want)
		}
	}
	if _, err := s.Cancelled(ctx, "nope"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Cancelled of an unknown run = %v, want ErrNotFound", err)
	}
}

// testTTL: a finished run is kept for the TTL, then it is gone and its id
// can be created again; a running run never expires.
func testTTL(t *testing.T, newStore NewStore) {
	const ttl = time.Minute
	tests := []struct {
		name          string
		finished      bool
		advance       time.Duration
		wantErr       error // from Snapshot, SetSnapshot, Subscribe and Cancelled
		wantAppendErr error // from Append, Finish and Cancel
	}{
		{name: "finished/just before TTL", finished: true, advance: ttl - time.Second, wantAppendErr: runs.ErrFinished},
		{name: "finished/at TTL", finished: true, advance: ttl, wantErr: runs.ErrNotFound, wantAppendErr: runs.ErrNotFound},
		{name: "finished/long after", finished: true, advance: 100 * ttl, wantErr: runs.ErrNotFound, wantAppendErr: runs.ErrNotFound},
		{name: "running/never expires", advance: 1000 * ttl},
	}
	is := func(err, want error) bool { return errors.Is(err, want) && (want != nil || err == nil) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subj := open(t, newStore, Options{TTL: ttl})
			s := subj.Store
			newRun(t, s, "r", 3, tt.finished)
			subj.Advance(tt.advance)
			ctx := t.Context()

			if _, err := s.Snapshot(ctx, "r"); !is(err, tt.wantErr) {
				t.Errorf("Snapshot error %v, want %v", err, tt.wantErr)
			}
			if err := s.SetSnapshot(ctx, "r", json.RawMessage(`{}`)); !is(err, tt.wantErr) {
				t.Errorf("SetSnapshot error %v, want %v", err, tt.wantErr)
			}
			if _, err := s.Cancelled(ctx, "r"); !is(err, tt.wantErr) {
				t.Errorf("Cancelled error %v, want %v", err, tt.wantErr)
			}
			sub, err := s.Subscribe(ctx, "r", 3)
			if !is(err, tt.wantErr) {
				t.Errorf("Subscribe error %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				sub.Close()
			}
			if _, err := s.Append(ctx, "r", "tool.completed", nil); !is(err, tt.wantAppendErr) {
				t.Errorf("Append error %v, want %v", err, tt.wantAppendErr)
			}
			if err := s.Cancel(ctx, "r"); !is(err, tt.wantAppendErr) {
				t.Errorf("Cancel error %v, want %v", err, tt.wantAppendErr)
			}
			// An expired id can be created again, with a new log; a kept
			// one cannot.
			wantCreateErr := runs.ErrExists
			if tt.wantErr != nil {
				wantCreateErr = nil
			}
			if err := s.Create(ctx, "r", nil); !is(err, wantCreateErr) {
				t.Errorf("Create error %v, want %v", err, wantCreateErr)
			}
			if wantCreateErr == nil {
				if ev, err := s.Append(ctx, "r", "tool.completed", nil); err != nil || ev.ID != 1 {
					t.Errorf("first Append to the new run: id %d, %v; want 1, nil", ev.ID, err)
				}
			}
		})
	}
}

// testLogCap: a run keeps its MaxEvents latest events, however many are
// appended; replaying from before them gives ErrExpired.
func testLogCap(t *testing.T, newStore NewStore) {
	const maxEvents = 5
	// 12 events: 8..12 are kept. A running run then gets 13, terminal.
	tests := []struct {
		name     string
		finished bool
		after    int64
		want     []int64
		wantErr  error
	}{
		{name: "running/from 0", after: 0, wantErr: runs.ErrExpired},
		{name: "running/just before the window", after: 6, wantErr: runs.ErrExpired},
		{name: "running/window start", after: 7, want: span(8, 13)},
		{name: "running/inside the window", after: 10, want: span(11, 13)},
		{name: "running/from last", after: 12, want: []int64{13}},
		{name: "finished/from 0", finished: true, after: 0, wantErr: runs.ErrExpired},
		{name: "finished/just before the window", finished: true, after: 6, wantErr: runs.ErrExpired},
		{name: "finished/window start", finished: true, after: 7, want: span(8, 12)},
		{name: "finished/from last", finished: true, after: 12, want: nil},
		{name: "finished/beyond last", finished: true, after: 30, want: []int64{12}},
		{name: "running/beyond last", after: 30, want: []int64{13}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, newStore, Options{MaxEvents: maxEvents}).Store
			log := newRun(t, s, "r", 12, tt.finished)
			sub, err := s.Subscribe(t.Context(), "r", tt.after)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Subscribe error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer sub.Close()
			if !tt.finished {
				log = append(log, appendN(t, s, "r", 13, 13, true)...)
			}
			got, err := drain(t, sub)
			if diff := cmp.Diff(pick(log, tt.want), got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if err != nil {
				t.Errorf("Err() = %v, want nil", err)
			}
		})
	}
	t.Run("a long run keeps the cap", func(t *testing.T) {
		const n = 50 * maxEvents
		s := open(t, newStore, Options{MaxEvents: maxEvents}).Store
		log := newRun(t, s, "r", n, true)
		if _, err := s.Subscribe(t.Context(), "r", n-maxEvents-1); !errors.Is(err, runs.ErrExpired) {
			t.Errorf("Subscribe after %d: %v, want ErrExpired", n-maxEvents-1, err)
		}
		got, err := drain(t, subscribe(t, s, t.Context(), "r", n-maxEvents))
		if diff := cmp.Diff(lines(pick(log, span(n-maxEvents+1, n))), lines(got)); diff != "" || err != nil {
			t.Errorf("the window (-want +got):\n%s\nErr() = %v", diff, err)
		}
	})
}

// testList: List pages through the kept runs newest first, with the latest
// snapshots, keeps what Match accepts, leaves out expired runs, and refuses
// a cursor it did not make.
func testList(t *testing.T, newStore NewStore) {
	const ttl = time.Minute
	snap := func(i int, status string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"n":%d,"status":%q}`, i, status))
	}
	// setup creates r1..r5 in order; r2 and r4 finish.
	setup := func(t *testing.T) Subject {
		subj := open(t, newStore, Options{TTL: ttl})
		ctx := context.Background()
		for i := 1; i <= 5; i++ {
			id := fmt.Sprintf("r%d", i)
			if err := subj.Store.Create(ctx, id, snap(i, "running")); err != nil {
				t.Fatalf("Create %s: %v", id, err)
			}
			if i%2 == 0 {
				if _, err := subj.Store.Finish(ctx, id, "loop.completed", nil, snap(i, "completed")); err != nil {
					t.Fatalf("Finish %s: %v", id, err)
				}
			}
		}
		return subj
	}
	// all pages through the runs with limit, returning the ids page by page.
	all := func(t *testing.T, s runs.Store, limit int, match func(json.RawMessage) bool) [][]string {
		t.Helper()
		var pages [][]string
		after := ""
		for range 10 {
			page, err := s.List(context.Background(), runs.ListQuery{After: after, Limit: limit, Match: match})
			if err != nil {
				t.Fatalf("List after %q: %v", after, err)
			}
			ids := []string{}
			for _, r := range page.Runs {
				ids = append(ids, r.ID)
			}
			pages = append(pages, ids)
			if page.Next == "" {
				return pages
			}
			after = page.Next
		}
		t.Fatalf("List never ends: %v", pages)
		return nil
	}
	completed := func(b json.RawMessage) bool { return strings.Contains(string(b), `"completed"`) }

	t.Run("pages newest first", func(t *testing.T) {
		s := setup(t).Store
		want := [][]string{{"r5", "r4"}, {"r3", "r2"}, {"r1"}}
		if diff := cmp.Diff(want, all(t, s, 2, nil)); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([][]string{{"r5", "r4", "r3", "r2", "r1"}}, all(t, s, 0, nil)); diff != "" {
			t.Errorf("default limit (-want +got):\n%s", diff)
		}
	})
	t.Run("latest snapshots", func(t *testing.T) {
		s := setup(t).Store
		if err := s.SetSnapshot(context.Background(), "r3", snap(3, "updated")); err != nil {
			t.Fatal(err)
		}
		page, err := s.List(context.Background(), runs.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range page.Runs {
			got[r.ID] = string(r.Summary)
		}
		want := map[string]string{"r1": string(snap(1, "running")), "r2": string(snap(2, "completed")), "r3": string(snap(3, "updated")),
			"r4": string(snap(4, "completed")), "r5": string(snap(5, "running"))}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("snapshots (-want +got):\n%s", diff)
		}
	})
	t.Run("match", func(t *testing.T) {
		s := setup(t).Store
		if diff := cmp.Diff([][]string{{"r4"}, {"r2"}}, all(t, s, 1, completed)); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
		none := func(json.RawMessage) bool { return false }
		if diff := cmp.Diff([][]string{{}}, all(t, s, 1, none)); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
	})
	t.Run("cursor survives new runs", func(t *testing.T) {
		s := setup(t).Store
		page, err := s.List(context.Background(), runs.ListQuery{Limit: 2})
		if err != nil || page.Next == "" {
			t.Fatalf("first page: %+v, %v", page, err)
		}
		create(t, s, "r6")
		next, err := s.List(context.Background(), runs.ListQuery{After: page.Next, Limit: 2})
		if err != nil || len(next.Runs) != 2 || next.Runs[0].ID != "r3" || next.Runs[1].ID != "r2" {
			t.Errorf("second page after a new run: %+v, %v; want r3, r2", next, err)
		}
	})
	t.Run("expired runs left out", func(t *testing.T) {
		subj := setup(t)
		subj.Advance(ttl)
		if diff := cmp.Diff([][]string{{"r5", "r3", "r1"}}, all(t, subj.Store, 10, nil)); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
	})
	t.Run("empty store", func(t *testing.T) {
		s := open(t, newStore, Options{}).Store
		page, err := s.List(context.Background(), runs.ListQuery{})
		if err != nil || len(page.Runs) != 0 || page.Next != "" {
			t.Errorf("List = %+v, %v; want an empty last page", page, err)
		}
	})
	t.Run("foreign cursor", func(t *testing.T) {
		s := setup(t).Store
		for _, c := range []string{"not a cursor", "-1"} {
			if _, err := s.List(context.Background(), runs.ListQuery{After: c}); !errors.Is(err, runs.ErrCursor) {
				t.Errorf("List after %q: %v, want ErrCursor", c, err)
			}
		}
	})
}

// testListSummaries: List gives the summary of each run's latest snapshot,
// made by Summarize when the snapshot is created, replaced or finished,
// and Match sees the summaries, never the snapshots.
func testListSummaries(t *testing.T, newStore NewStore) {
	// The summary of a snapshot is its status and size.
	summarize := func(snap json.RawMessage) json.RawMessage {
		var v struct{ Status string }
		if err := json.Unmarshal(snap, &v); err != nil {
			t.Errorf("Summarize(%.40q): %v", snap, err)
		}
		return json.RawMessage(fmt.Sprintf(`{"status":%q,"size":%d}`, v.Status, len(snap)))
	}
	big := func(status string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"status":%q,"messages":[%q]}`, status, strings.Repeat("x", 100000)))
	}
	s := open(t, newStore, Options{Summarize: summarize}).Store
	ctx := context.Background()
	for _, id := range []string{"r1", "r2", "r3"} {
		if err := s.Create(ctx, id, big("running")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetSnapshot(ctx, "r2", big("updated")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, "r3", "loop.completed", nil, big("completed")); err != nil {
		t.Fatal(err)
	}
	var seen []string
	page, err := s.List(ctx, runs.ListQuery{Match: func(sum json.RawMessage) bool {
		seen = append(seen, string(sum))
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range page.Runs {
		got[r.ID] = string(r.Summary)
	}
	size := len(big("running"))
	want := map[string]string{
		"r1": fmt.Sprintf(`{"status":"running","size":%d}`, size),
		"r2": fmt.Sprintf(`{"status":"updated","size":%d}`, size),
		"r3": fmt.Sprintf(`{"status":"completed","size":%d}`, size+2),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
	for _, sum := range seen {
		if len(sum) > 100 {
			t.Errorf("Match got %d bytes, want a summary", len(sum))
		}
	}
}

// testSizeCap: past MaxBytes a store drops its oldest finished runs (in
// the order they finished), never a running one, when a run is created or
// finished.
func testSizeCap(t *testing.T, newStore NewStore) {
	snap := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", 280)))
	}
	// Each run holds about 300 bytes: three fit, four do not.
	s := open(t, newStore, Options{MaxBytes: 1000}).Store
	ctx := context.Background()
	kept := func() []string {
		t.Helper()
		var ids []string
		for _, id := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
			_, err := s.Snapshot(ctx, id)
			switch {
			case err == nil:
				ids = append(ids, id)
			case !errors.Is(err, runs.ErrNotFound):
				t.Fatalf("Snapshot %s: %v", id, err)
			}
		}
		return ids
	}
	steps := []struct {
		do   string // "create rN" or "finish rN"
		want []string
	}{
		{"create r1", []string{"r1"}},
		{"create r2", []string{"r1", "r2"}},
		{"create r3", []string{"r1", "r2", "r3"}},
		{"finish r2", []string{"r1", "r2", "r3"}},
		{"finish r1", []string{"r1", "r2", "r3"}},
		// Over the cap: r2 finished first, and goes first.
		{"create r4", []string{"r1", "r3", "r4"}},
		{"create r5", []string{"r3", "r4", "r5"}},
		// Nothing finished is left: running runs stay, over the cap.
		{"create r6", []string{"r3", "r4", "r5", "r6"}},
		{"finish r6", []string{"r3", "r4", "r5"}},
	}
	for i, st := range steps {
		verb, id, _ := strings.Cut(st.do, " ")
		var err error
		if verb == "create" {
			err = s.Create(ctx, id, snap(i))
		} else {
			_, err = s.Finish(ctx, id, "end", nil, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", st.do, err)
		}
		if diff := cmp.Diff(st.want, kept()); diff != "" {
			t.Fatalf("kept after %s (-want +got):\n%s", st.do, diff)
		}
	}
	page, err := s.List(ctx, runs.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range page.Runs {
		listed = append(listed, r.ID)
	}
	if diff := cmp.Diff([]string{"r5", "r4", "r3"}, listed); diff != "" {
		t.Errorf("List after the evictions (-want +got):\n%s", diff)
	}
}
