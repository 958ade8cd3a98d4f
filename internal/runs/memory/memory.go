// Package memory is the in-process runs.Store.
//
// Its subscriptions cost no goroutine: events are delivered by non-blocking
// sends into buffered channels (runs.Fanout), so a slow subscriber never
// blocks Append nor other subscribers; it is cut instead (runs.ErrSlow) and resumes by id. A
// run keeps a bounded window of its latest events, and a finished run
// expires after a time to live.
package memory

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sampled/sampled/internal/runs"
)

// Defaults of Options.
const (
	defaultMaxEvents = 10000
	defaultTTL       = time.Hour
	defaultBuffer    = 256
)

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// MaxEvents is the number of events kept per run; 0 means 10000. Older
	// events are dropped, and replaying from before them gives
	// runs.ErrExpired.
	MaxEvents int
	// TTL is how long a finished run is kept after its terminal event; 0
	// means 1h.
	TTL time.Duration
	// Buffer is the number of live events a subscriber may fall behind
	// before it is cut with runs.ErrSlow; 0 means 256.
	Buffer int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Store is the in-process runs.Store. It runs no goroutine: finished runs
// are expired lazily when accessed and swept during Create, Append and
// Finish.
//
// Store ignores the ctx of its methods except Subscribe's, which bounds the
// subscription. Use New; the zero value is not usable.
type Store struct {
	maxEvents int
	ttl       time.Duration
	buffer    int
	now       func() time.Time

	mu   sync.RWMutex // guards runs and created
	runs map[string]*run
	// created counts the runs created; each run's seq is its count.
	created uint64

	closed atomic.Bool // Close was called

	// expiries lists finished runs in the order they finished; nextExpiry
	// is the UnixNano of the first one's expiry, or MaxInt64.
	expMu      sync.Mutex
	expiries   []expiry
	nextExpiry atomic.Int64
}

var _ runs.Store = (*Store)(nil)

// expiry is a finished run and when it expires.
type expiry struct {
	id string
	r  *run
	at time.Time
}

// run is one run. Its mutex guards every field and the delivery of events
// to its subscriptions.
type run struct {
	seq        uint64 // creation order, from 1; set before the run is shared
	mu         sync.Mutex
	snapshot   json.RawMessage
	events     []runs.Event // the retained window: contiguous ids ending at last
	last       int64        // id of the last event appended; 0 before the first
	finished   bool
	finishedAt time.Time
	cancel     chan struct{} // closed by Cancel
	cancelled  bool
	// fan holds the live subscriptions; r.mu guards it.
	fan *runs.Fanout
}

// New returns an empty Store.
func New(o Options) *Store {
	m := &Store{
		maxEvents: o.MaxEvents,
		ttl:       o.TTL,
		buffer:    o.Buffer,
		now:       o.Now,
		runs:      make(map[string]*run),
	}
	if m.maxEvents <= 0 {
		m.maxEvents = defaultMaxEvents
	}
	if m.ttl <= 0 {
		m.ttl = defaultTTL
	}
	if m.buffer <= 0 {
		m.buffer = defaultBuffer
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.nextExpiry.Store(math.MaxInt64)
	return m
}

// Create adds a running run with an empty log. An id still kept gives
// runs.ErrExists; the id of an expired run is reused.
func (m *Store) Create(_ context.Context, id string, snapshot json.RawMessage) error {
	now := m.now()
	m.sweep(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.runs[id]; ok {
		old.mu.Lock()
		expired := old.expired(now, m.ttl)
		old.mu.Unlock()
		if !expired {
			return fmt.Errorf("runs: create %q: %w", id, runs.ErrExists)
		}
	}
	m.created++
	r := &run{seq: m.created, snapshot: clone(snapshot), cancel: make(chan struct{})}
	r.fan = runs.NewFanout(&r.mu)
	m.runs[id] = r
	return nil
}

// List returns a page of the kept runs q.Match accepts, newest first; see
// runs.Store. It sorts the kept runs by creation on each call, and calls
// Match with no lock held. A cursor is the creation number of the last run
// of a page.
func (m *Store) List(_ context.Context, q runs.ListQuery) (runs.Page, error) {
	before := uint64(math.MaxUint64)
	if q.After != "" {
		n, err := strconv.ParseUint(q.After, 10, 64)
		if err != nil || n == 0 {
			return runs.Page{}, fmt.Errorf("runs: list after %q: %w", q.After, runs.ErrCursor)
		}
		before = n
	}
	limit := q.Limit
	if limit <= 0 {
		limit = runs.DefaultListLimit
	}
	type entry struct {
		id string
		r  *run
	}
	m.mu.RLock()
	all := make([]entry, 0, len(m.runs))
	for id, r := range m.runs {
		if r.seq < before {
			all = append(all, entry{id, r})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(b.r.seq, a.r.seq) })
	now := m.now()
	page := runs.Page{Runs: []runs.Listed{}}
	var last uint64 // seq of the last run of the page
	for _, e := range all {
		e.r.mu.Lock()
		expired := e.r.expired(now, m.ttl)
		snap := clone(e.r.snapshot)
		e.r.mu.Unlock()
		if expired || q.Match != nil && !q.Match(snap) {
			continue
		}
		if len(page.Runs) == limit {
			page.Next = strconv.FormatUint(last, 10)
			break
		}
		page.Runs = append(page.Runs, runs.Listed{ID: e.id, Snapshot: snap})
		last = e.r.seq
	}
	return page, nil
}

// SetSnapshot replaces the run's snapshot with a copy of snapshot.
func (m *Store) SetSnapshot(_ context.Context, id string, snapshot json.RawMessage) error {
	r, _, err := m.lock(id)
	if err != nil {
		return fmt.Errorf("runs: set snapshot of %q: %w", id, err)
	}
	defer r.mu.Unlock()
	r.snapshot = clone(snapshot)
	return nil
}

// Snapshot returns a copy of the run's latest snapshot.
func (m *Store) Snapshot(_ context.Context, id string) (json.RawMessage, error) {
	r, _, err := m.lock(id)
	if err != nil {
		return nil, fmt.Errorf("runs: snapshot of %q: %w", id, err)
	}
	defer r.mu.Unlock()
	return clone(r.snapshot), nil
}

// Append adds an event (with a copy of data) and delivers it to the run's
// subscriptions without blocking: a subscription whose buffer is full is
// cut with runs.ErrSlow. The returned Event shares its Data with the log:
// do not modify it.
func (m *Store) Append(_ context.Context, id, name string, data json.RawMessage) (runs.Event, error) {
	ev, err := m.append(id, name, data, nil, false)
	if err != nil {
		return runs.Event{}, fmt.Errorf("runs: append to %q: %w", id, err)
	}
	return ev, nil
}

// Finish appends the terminal event and replaces the snapshot (unless nil)
// under the run's lock, delivers the event and ends every subscription.
// Further Appends, Finishes and Cancels give runs.ErrFinished, and the run
// expires after the TTL.
func (m *Store) Finish(_ context.Context, id, name string, data, snapshot json.RawMessage) (runs.Event, error) {
	ev, err := m.append(id, name, data, snapshot, true)
	if err != nil {
		return runs.Event{}, fmt.Errorf("runs: finish %q: %w", id, err)
	}
	return ev, nil
}

func (m *Store) append(id, name string, data, snapshot json.RawMessage, terminal bool) (runs.Event, error) {
	r, now, err := m.lock(id)
	if err != nil {
		return runs.Event{}, err
	}
	if r.finished {
		r.mu.Unlock()
		return runs.Event{}, runs.ErrFinished
	}
	r.last++
	ev := runs.Event{ID: r.last, Name: name, Data: clone(data)}
	if len(r.events) >= m.maxEvents {
		n := len(r.events) - m.maxEvents + 1
		clear(r.events[:n]) // let the dropped payloads be collected
		r.events = r.events[n:]
	}
	r.events = append(r.events, ev)
	r.fan.Deliver(ev, terminal)
	if terminal {
		r.finished = true
		r.finishedAt = now
		if snapshot != nil {
			r.snapshot = clone(snapshot)
		}
	}
	r.mu.Unlock()
	if terminal {
		m.scheduleExpiry(id, r, now.Add(m.ttl))
	}
	m.sweep(now)
	return ev, nil
}

// Subscribe replays the retained events with ID > after, then follows live
// ones; see runs.Store. Replay and registration happen under the run's
// lock, so nothing is missed or repeated between them. The subscription's
// channel holds the whole replay plus the Buffer.
//
// A ctx that is already done gives its error.
func (m *Store) Subscribe(ctx context.Context, id string, after int64) (runs.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("runs: subscribe to %q: %w", id, err)
	}
	r, _, err := m.lock(id)
	if err != nil {
		return nil, fmt.Errorf("runs: subscribe to %q: %w", id, err)
	}
	defer r.mu.Unlock()
	after = max(after, 0)
	first := r.last + 1 - int64(len(r.events)) // id of events[0]
	if after < r.last && after+1 < first {
		return nil, fmt.Errorf("runs: subscribe to %q after %d (oldest kept is %d): %w", id, after, first, runs.ErrExpired)
	}
	var replay []runs.Event
	switch {
	case after < r.last:
		replay = r.events[after+1-first:]
	case r.finished && after > r.last:
		// Resumed beyond the terminal event, at an id the run never
		// reached: the terminal event is sent, so the stream still ends
		// with it.
		replay = r.events[len(r.events)-1:]
	}
	// Closed checked under r.mu: Close sets it before it ends the
	// subscriptions of every run, each under its lock.
	if !r.finished && !m.closed.Load() {
		return r.fan.Subscribe(ctx, after, replay, m.buffer), nil
	}
	var end error
	if !r.finished {
		end = runs.ErrClosed
	}
	return runs.Ended(replay, end), nil
}

// Cancel records the request to cancel a running run and closes its
// Cancelled channel.
func (m *Store) Cancel(_ context.Context, id string) error {
	r, _, err := m.lock(id)
	if err != nil {
		return fmt.Errorf("runs: cancel %q: %w", id, err)
	}
	defer r.mu.Unlock()
	if r.finished {
		return fmt.Errorf("runs: cancel %q: %w", id, runs.ErrFinished)
	}
	if !r.cancelled {
		r.cancelled = true
		close(r.cancel)
	}
	return nil
}

// Cancelled returns the channel that Cancel closes. It holds nothing for
// the watch: ctx is not needed.
func (m *Store) Cancelled(_ context.Context, id string) (<-chan struct{}, error) {
	r, _, err := m.lock(id)
	if err != nil {
		return nil, fmt.Errorf("runs: watch %q for cancellation: %w", id, err)
	}
	defer r.mu.Unlock()
	return r.cancel, nil
}

// Close ends every open subscription with runs.ErrClosed, so that streams
// end at shutdown; later subscriptions deliver their replay and end at
// once. Runs stay readable and writable: Store runs no goroutine, so there
// is nothing else to stop. It always returns nil.
func (m *Store) Close() error {
	m.closed.Store(true)
	m.mu.RLock()
	all := make([]*run, 0, len(m.runs))
	for _, r := range m.runs {
		all = append(all, r)
	}
	m.mu.RUnlock()
	for _, r := range all {
		r.mu.Lock()
		r.fan.End(runs.ErrClosed)
		r.mu.Unlock()
	}
	return nil
}

// lock returns the live run with that id, locked, and the time it was
// checked at. An expired run is removed and gives runs.ErrNotFound.
func (m *Store) lock(id string) (*run, time.Time, error) {
	now := m.now()
	m.mu.RLock()
	r, ok := m.runs[id]
	m.mu.RUnlock()
	if !ok {
		return nil, now, runs.ErrNotFound
	}
	r.mu.Lock()
	if r.expired(now, m.ttl) {
		r.mu.Unlock()
		m.remove(id, r)
		return nil, now, runs.ErrNotFound
	}
	return r, now, nil
}

// remove deletes the run r under id, unless id was reused meanwhile.
func (m *Store) remove(id string, r *run) {
	m.mu.Lock()
	if m.runs[id] == r {
		delete(m.runs, id)
	}
	m.mu.Unlock()
}

// scheduleExpiry queues r, finished, for the sweep.
func (m *Store) scheduleExpiry(id string, r *run, at time.Time) {
	m.expMu.Lock()
	defer m.expMu.Unlock()
	m.expiries = append(m.expiries, expiry{id: id, r: r, at: at})
	m.nextExpiry.Store(m.expiries[0].at.UnixNano())
}

// sweep removes the finished runs that expired by now. Runs are queued in
// the order they finished; with a clock that goes back, a run may wait in
// the queue past its expiry, but lock expires it on access anyway.
func (m *Store) sweep(now time.Time) {
	if now.UnixNano() < m.nextExpiry.Load() {
		return
	}
	m.expMu.Lock()
	n := 0
	for n < len(m.expiries) && !now.Before(m.expiries[n].at) {
		n++
	}
	due := make([]expiry, n)
	copy(due, m.expiries[:n])
	clear(m.expiries[:n])
	m.expiries = m.expiries[n:]
	if len(m.expiries) == 0 {
		m.expiries = nil
		m.nextExpiry.Store(math.MaxInt64)
	} else {
		m.nextExpiry.Store(m.expiries[0].at.UnixNano())
	}
	m.expMu.Unlock()
	if len(due) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range due {
		if m.runs[e.id] == e.r {
			delete(m.runs, e.id)
		}
	}
}

// expired reports whether r finished at least ttl before now. r.mu must be
// held.
func (r *run) expired(now time.Time, ttl time.Duration) bool {
	return r.finished && !now.Before(r.finishedAt.Add(ttl))
}

// clone copies b; nil stays nil.
func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}
