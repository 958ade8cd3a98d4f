// Package memory is the in-process runs.Store.
//
// Its subscriptions cost no goroutine: events are delivered by non-blocking
// sends into buffered channels (runs.Fanout), so a slow subscriber never
// blocks Append nor other subscribers; it is cut instead (runs.ErrSlow) and resumes by id. A
// run keeps a bounded window of its latest events, a finished run expires
// after a time to live, and past the store's size cap the oldest finished
// runs go first.
package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
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
	defaultMaxBytes  = 256 << 20
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
	// MaxBytes caps the bytes of the kept runs' snapshots and event data;
	// 0 means 256 MiB. Past it, when a run is created or an event
	// appended, the runs that finished first are dropped before their
	// TTL; running runs stay.
	MaxBytes int64
	// Summarize makes the summaries List gives; nil keeps the snapshots.
	Summarize runs.Summarize
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
	maxBytes  int64
	summarize runs.Summarize
	now       func() time.Time

	mu   sync.RWMutex // guards runs, order and created
	runs map[string]*run
	// order is the kept runs in the order they were created, and some
	// dropped ones; List walks it. It is only appended to, or replaced
	// by a compacted copy: a slice of it stays valid without mu.
	order []*run
	// created counts the runs created; each run's seq is its count.
	created uint64
	// bytes is the size of the kept runs (see run.size).
	bytes atomic.Int64

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
	r  *run
	at time.Time
}

// run is one run. Its mutex guards every field and the delivery of events
// to its subscriptions.
type run struct {
	id         string
	seq        uint64 // creation order, from 1; set before the run is shared
	mu         sync.Mutex
	gone       bool  // dropped from the store
	size       int64 // bytes of snapshot and of the events' names and data
	snapshot   json.RawMessage
	summary    json.RawMessage // never modified: List hands it out
	events     []runs.Event    // the retained window: contiguous ids ending at last
	last       int64           // id of the last event appended; 0 before the first
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
		maxBytes:  o.MaxBytes,
		summarize: o.Summarize,
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
	if m.maxBytes <= 0 {
		m.maxBytes = defaultMaxBytes
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
	snap, sum := m.copy(snapshot)
	defer m.sweep(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.runs[id]; ok {
		old.mu.Lock()
		expired := old.expired(now, m.ttl)
		old.mu.Unlock()
		if !expired {
			return fmt.Errorf("runs: create %q: %w", id, runs.ErrExists)
		}
		m.drop(old)
	}
	m.created++
	r := &run{id: id, seq: m.created, cancel: make(chan struct{})}
	r.fan = runs.NewFanout(&r.mu)
	r.set(m, snap, sum)
	m.runs[id] = r
	m.order = append(m.order, r)
	return nil
}

// copy returns a copy of snapshot and its summary.
func (m *Store) copy(snapshot json.RawMessage) (snap, sum json.RawMessage) {
	snap = clone(snapshot)
	if m.summarize == nil || snap == nil {
		return snap, snap
	}
	return snap, m.summarize(snap)
}

// set replaces r's snapshot and summary, and counts the change of size.
// r.mu must be held, or r not yet shared.
func (r *run) set(m *Store, snap, sum json.RawMessage) {
	r.grow(m, int64(len(snap)-len(r.snapshot)))
	r.snapshot, r.summary = snap, sum
}

// grow counts delta more bytes in r and the store. r.mu must be held, or
// r not yet shared.
func (r *run) grow(m *Store, delta int64) {
	r.size += delta
	m.bytes.Add(delta)
}

// List returns a page of the kept runs q.Match accepts, newest first, with
// their summaries; see runs.Store. It walks the runs back from the cursor
// in creation order, and calls Match with no lock held. A cursor is the
// creation number of the last run of a page. The summaries are shared:
// treat them as read-only.
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
	m.mu.RLock()
	order := m.order
	m.mu.RUnlock()
	now := m.now()
	page := runs.Page{Runs: []runs.Listed{}}
	var last uint64 // seq of the last run of the page
	for i := sort.Search(len(order), func(i int) bool { return order[i].seq >= before }) - 1; i >= 0; i-- {
		r := order[i]
		r.mu.Lock()
		skip := r.gone || r.expired(now, m.ttl)
		sum := r.summary
		r.mu.Unlock()
		if skip || q.Match != nil && !q.Match(sum) {
			continue
		}
		if len(page.Runs) == limit {
			page.Next = strconv.FormatUint(last, 10)
			break
		}
		page.Runs = append(page.Runs, runs.Listed{ID: r.id, Summary: sum})
		last = r.seq
	}
	return page, nil
}

// SetSnapshot replaces the run's snapshot with a copy of snapshot.
func (m *Store) SetSnapshot(_ context.Context, id string, snapshot json.RawMessage) error {
	snap, sum := m.copy(snapshot)
	r, _, err := m.lock(id)
	if err != nil {
		return fmt.Errorf("runs: set snapshot of %q: %w", id, err)
	}
	defer r.mu.Unlock()
	r.set(m, snap, sum)
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
	var snap, sum json.RawMessage
	if snapshot != nil {
		snap, sum = m.copy(snapshot)
	}
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
		for _, old := range r.events[:n] {
			r.grow(m, -eventSize(old))
		}
		clear(r.events[:n]) // let the dropped payloads be collected
		r.events = r.events[n:]
	}
	r.events = append(r.events, ev)
	r.grow(m, eventSize(ev))
	r.fan.Deliver(ev, terminal)
	if terminal {
		r.finished = true
		r.finishedAt = now
		if snapshot != nil {
			r.set(m, snap, sum)
		}
	}
	r.mu.Unlock()
	if terminal {
		m.scheduleExpiry(r, now.Add(m.ttl))
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
	if r.gone {
		r.mu.Unlock()
		return nil, now, runs.ErrNotFound
	}
	if r.expired(now, m.ttl) {
		r.mu.Unlock()
		m.remove(r)
		return nil, now, runs.ErrNotFound
	}
	return r, now, nil
}

// remove drops r, unless it was dropped already.
func (m *Store) remove(r *run) {
	m.mu.Lock()
	m.drop(r)
	m.mu.Unlock()
}

// drop deletes r from the store, unless its id was created again or it was
// dropped already, and discounts its size. m.mu must be held. Once the
// dropped runs are half of order, order is compacted into a new slice.
func (m *Store) drop(r *run) {
	if m.runs[r.id] != r {
		return
	}
	delete(m.runs, r.id)
	r.mu.Lock()
	r.gone = true
	m.bytes.Add(-r.size)
	r.mu.Unlock()
	if len(m.order) > 2*len(m.runs)+64 {
		kept := make([]*run, 0, 2*len(m.runs))
		for _, o := range m.order {
			if m.runs[o.id] == o {
				kept = append(kept, o)
			}
		}
		m.order = kept
	}
}

// eventSize is what an event counts in a run's size.
func eventSize(ev runs.Event) int64 { return int64(len(ev.Name) + len(ev.Data)) }

// scheduleExpiry queues r, finished, for the sweep.
func (m *Store) scheduleExpiry(r *run, at time.Time) {
	m.expMu.Lock()
	defer m.expMu.Unlock()
	m.expiries = append(m.expiries, expiry{r: r, at: at})
	m.nextExpiry.Store(m.expiries[0].at.UnixNano())
}

// sweep drops the finished runs that expired by now, and, while the store
// holds more than its cap, the runs that finished first. Runs are queued
// in the order they finished; with a clock that goes back, a run may wait
// in the queue past its expiry, but lock expires it on access anyway.
func (m *Store) sweep(now time.Time) {
	for {
		r := m.due(now)
		if r == nil {
			return
		}
		m.remove(r)
	}
}

// due takes the first run of the expiry queue if it expired by now or the
// store is over its cap; nil when there is none to drop.
func (m *Store) due(now time.Time) *run {
	over := m.bytes.Load() > m.maxBytes
	if !over && now.UnixNano() < m.nextExpiry.Load() {
		return nil
	}
	m.expMu.Lock()
	defer m.expMu.Unlock()
	if len(m.expiries) == 0 || !over && now.Before(m.expiries[0].at) {
		return nil
	}
	r := m.expiries[0].r
	m.expiries[0] = expiry{}
	m.expiries = m.expiries[1:]
	next := int64(math.MaxInt64)
	if len(m.expiries) > 0 {
		next = m.expiries[0].at.UnixNano()
	} else {
		m.expiries = nil
	}
	m.nextExpiry.Store(next)
	return r
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
