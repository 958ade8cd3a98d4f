package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of MemoryOptions.
const (
	defaultMaxEvents = 10000
	defaultTTL       = time.Hour
	defaultBuffer    = 256
)

// MemoryOptions configure a Memory. The zero value means the defaults.
type MemoryOptions struct {
	// MaxEvents is the number of events kept per run; 0 means 10000. Older
	// events are dropped, and replaying from before them gives ErrExpired.
	MaxEvents int
	// TTL is how long a finished run is kept after its terminal event; 0
	// means 1h.
	TTL time.Duration
	// Buffer is the number of live events a subscriber may fall behind
	// before it is dropped with ErrSlow; 0 means 256.
	Buffer int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Memory is the in-process Store. It runs no goroutine: finished runs are
// expired lazily when accessed and swept during Create and Append.
//
// Memory ignores the ctx of its methods except Subscribe's, which bounds the
// subscription. Use NewMemory; the zero value is not usable.
type Memory struct {
	maxEvents int
	ttl       time.Duration
	buffer    int
	now       func() time.Time

	mu   sync.RWMutex // guards runs
	runs map[string]*memRun

	subs atomic.Int64 // open (live) subscriptions

	// expiries lists finished runs in the order they finished; nextExpiry
	// is the UnixNano of the first one's expiry, or MaxInt64.
	expMu      sync.Mutex
	expiries   []expiry
	nextExpiry atomic.Int64
}

// expiry is a finished run and when it expires.
type expiry struct {
	id string
	r  *memRun
	at time.Time
}

// memRun is one run. Its mutex guards every field and the delivery of
// events to its subscriptions.
type memRun struct {
	mu         sync.Mutex
	snapshot   json.RawMessage
	events     []*Event // the retained window: contiguous ids ending at last
	last       int64    // id of the last event appended; 0 before the first
	finished   bool
	finishedAt time.Time
	// subs are the live subscriptions, in no order; each knows its index.
	// A slice, not a map: Append walks it for every event.
	subs []*Subscription
}

// NewMemory returns an empty Memory.
func NewMemory(o MemoryOptions) *Memory {
	m := &Memory{
		maxEvents: o.MaxEvents,
		ttl:       o.TTL,
		buffer:    o.Buffer,
		now:       o.Now,
		runs:      make(map[string]*memRun),
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
// ErrExists; the id of an expired run is reused.
func (m *Memory) Create(_ context.Context, id string, snapshot json.RawMessage) error {
	now := m.now()
	m.sweep(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.runs[id]; ok {
		old.mu.Lock()
		expired := old.expired(now, m.ttl)
		old.mu.Unlock()
		if !expired {
			return fmt.Errorf("runs: create %q: %w", id, ErrExists)
		}
	}
	m.runs[id] = &memRun{snapshot: clone(snapshot)}
	return nil
}

// SetSnapshot replaces the run's snapshot.
func (m *Memory) SetSnapshot(_ context.Context, id string, snapshot json.RawMessage) error {
	r, _, err := m.lock(id)
	if err != nil {
		return fmt.Errorf("runs: set snapshot of %q: %w", id, err)
	}
	defer r.mu.Unlock()
	r.snapshot = clone(snapshot)
	return nil
}

// Snapshot returns a copy of the run's latest snapshot.
func (m *Memory) Snapshot(_ context.Context, id string) (json.RawMessage, error) {
	r, _, err := m.lock(id)
	if err != nil {
		return nil, fmt.Errorf("runs: snapshot of %q: %w", id, err)
	}
	defer r.mu.Unlock()
	return clone(r.snapshot), nil
}

// Append adds an event (with a copy of data) and delivers it to the run's
// subscriptions without blocking: a subscription whose buffer is full is
// dropped with ErrSlow. After a terminal event every subscription is closed,
// further Appends give ErrFinished and the run expires after the TTL. The
// returned Event shares its Data with the log: do not modify it.
func (m *Memory) Append(_ context.Context, id, name string, data json.RawMessage, terminal bool) (Event, error) {
	r, now, err := m.lock(id)
	if err != nil {
		return Event{}, fmt.Errorf("runs: append to %q: %w", id, err)
	}
	if r.finished {
		r.mu.Unlock()
		return Event{}, fmt.Errorf("runs: append to %q: %w", id, ErrFinished)
	}
	r.last++
	// One Event per append, shared by the log and every subscriber:
	// a subscription buffers pointers, not copies.
	// The event and its Wire memo are one allocation.
	alloc := &struct {
		ev Event
		w  wire
	}{ev: Event{ID: r.last, Name: name, Data: clone(data)}}
	alloc.ev.wire = &alloc.w
	ev := &alloc.ev
	if len(r.events) >= m.maxEvents {
		n := len(r.events) - m.maxEvents + 1
		clear(r.events[:n]) // let the dropped payloads be collected
		r.events = r.events[n:]
	}
	r.events = append(r.events, ev)
	// drop moves the last subscription into the dropped one's place, so
	// after a drop the same index is visited again.
	for i := 0; i < len(r.subs); {
		s := r.subs[i]
		if ev.ID > s.after { // else: subscribed after an id not reached yet
			select {
			case s.ch <- ev:
			default:
				m.drop(r, s, ErrSlow)
				continue
			}
		}
		if terminal {
			m.drop(r, s, nil)
			continue
		}
		i++
	}
	if terminal {
		r.finished = true
		r.finishedAt = now
	}
	r.mu.Unlock()
	if terminal {
		m.scheduleExpiry(id, r, now.Add(m.ttl))
	}
	m.sweep(now)
	return *ev, nil
}

// Subscribe replays the retained events with ID > after (after < 0 counts
// as 0), then follows live ones; see Store. Replay and registration happen
// under the run's lock, so nothing is missed or repeated between them. The
// subscription's channel holds the whole replay plus the Buffer.
//
// A subscription to a finished run holds the replay and is already closed.
// A ctx that is already done gives its error.
func (m *Memory) Subscribe(ctx context.Context, id string, after int64) (*Subscription, error) {
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
		return nil, fmt.Errorf("runs: subscribe to %q after %d (oldest kept is %d): %w", id, after, first, ErrExpired)
	}
	var replay []*Event
	if after < r.last {
		replay = r.events[after+1-first:]
	}
	s := &Subscription{after: after, m: m, r: r, idx: -1}
	if r.finished {
		s.ch = make(chan *Event, len(replay))
	} else {
		s.ch = make(chan *Event, len(replay)+m.buffer)
	}
	for _, ev := range replay {
		s.ch <- ev // never blocks: the channel has room for the replay
	}
	if r.finished {
		close(s.ch)
		return s, nil
	}
	s.idx = len(r.subs)
	r.subs = append(r.subs, s)
	m.subs.Add(1)
	// Registered under r.mu so that drop, also under r.mu, sees stop. If
	// ctx is already done the callback waits for r.mu and then drops s.
	s.stop = context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		m.drop(r, s, nil)
	})
	return s, nil
}

// Subscribers returns the number of open subscriptions that follow live
// events (for a gauge).
func (m *Memory) Subscribers() int {
	return int(m.subs.Load())
}

// Close ends every open subscription (channels closed, Err nil), so that
// streams end at shutdown. Memory runs no goroutine, so there is nothing
// else to stop; runs stay readable and new subscriptions work.
func (m *Memory) Close() {
	m.mu.RLock()
	all := make([]*memRun, 0, len(m.runs))
	for _, r := range m.runs {
		all = append(all, r)
	}
	m.mu.RUnlock()
	for _, r := range all {
		r.mu.Lock()
		for len(r.subs) > 0 {
			m.drop(r, r.subs[len(r.subs)-1], nil)
		}
		r.mu.Unlock()
	}
}

// lock returns the live run with that id, locked, and the time it was
// checked at. An expired run is removed and gives ErrNotFound.
func (m *Memory) lock(id string) (*memRun, time.Time, error) {
	now := m.now()
	m.mu.RLock()
	r, ok := m.runs[id]
	m.mu.RUnlock()
	if !ok {
		return nil, now, ErrNotFound
	}
	r.mu.Lock()
	if r.expired(now, m.ttl) {
		r.mu.Unlock()
		m.remove(id, r)
		return nil, now, ErrNotFound
	}
	return r, now, nil
}

// remove deletes the run r under id, unless id was reused meanwhile.
func (m *Memory) remove(id string, r *memRun) {
	m.mu.Lock()
	if m.runs[id] == r {
		delete(m.runs, id)
	}
	m.mu.Unlock()
}

// drop ends subscription s of r with err. r.mu must be held.
func (m *Memory) drop(r *memRun, s *Subscription, err error) {
	if s.idx < 0 { // never registered, or dropped already
		return
	}
	last := len(r.subs) - 1
	r.subs[s.idx] = r.subs[last]
	r.subs[s.idx].idx = s.idx
	r.subs[last] = nil
	r.subs = r.subs[:last]
	s.idx = -1
	s.stop()
	s.err = err
	m.subs.Add(-1) // before close: whoever sees the close sees the count
	close(s.ch)
}

// scheduleExpiry queues r, finished, for the sweep.
func (m *Memory) scheduleExpiry(id string, r *memRun, at time.Time) {
	m.expMu.Lock()
	defer m.expMu.Unlock()
	m.expiries = append(m.expiries, expiry{id: id, r: r, at: at})
	m.nextExpiry.Store(m.expiries[0].at.UnixNano())
}

// sweep removes the finished runs that expired by now. Runs are queued in
// the order they finished; with a clock that goes back, a run may wait in
// the queue past its expiry, but lock expires it on access anyway.
func (m *Memory) sweep(now time.Time) {
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
func (r *memRun) expired(now time.Time, ttl time.Duration) bool {
	return r.finished && !now.Before(r.finishedAt.Add(ttl))
}

// clone copies b; nil stays nil.
func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}

// Subscription is a subscriber's view of a run's event log: replayed events,
// then live ones, on one channel. Get one from Subscribe; the zero value is
// not usable.
type Subscription struct {
	ch    chan *Event
	after int64 // live events with ID <= after are skipped
	m     *Memory
	r     *memRun     // its mu guards err, stop and idx
	stop  func() bool // stops watching the subscriber's ctx; nil if never registered
	idx   int         // index in r.subs; -1 when not registered
	err   error
}

// Events returns the channel of events. It is closed after the terminal
// event, when the subscription's ctx ends, on Close, or when the subscriber
// fell too far behind (see Err).
func (s *Subscription) Events() <-chan *Event {
	return s.ch
}

// Err tells why the channel was closed: ErrSlow if the subscriber fell more
// than its buffer behind (resume by subscribing after the last id read),
// else nil (terminal event delivered, ctx ended, or Close). Before the
// channel is closed it returns nil.
func (s *Subscription) Err() error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.err
}

// Close ends the subscription and releases what the store held for it. It
// is idempotent and safe to call concurrently with everything else. Events
// still buffered stay readable until the channel is drained.
func (s *Subscription) Close() {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.m.drop(s.r, s, nil)
}
