package runs

import (
	"context"
	"sync"
)

// Fanout is the live subscriptions of one run in one process, for the
// stores: it delivers each event to all of them by non-blocking sends into
// buffered channels, so that nothing waits for a subscriber, and cuts a
// subscriber that fell too far behind with ErrSlow.
//
// Its methods must be called with mu, the lock given to NewFanout, held:
// the store holds it while it reads the replay and registers a
// subscription, and while it delivers, so that a subscriber misses nothing
// and gets nothing twice between the two. The subscriptions take mu
// themselves (Err, Close, the end of their ctx).
type Fanout struct {
	mu sync.Locker
	// subs are in no order; each knows its index. A slice, not a map:
	// Deliver walks it for every event.
	subs []*fanoutSub
}

// NewFanout returns an empty Fanout guarded by mu.
func NewFanout(mu sync.Locker) *Fanout { return &Fanout{mu: mu} }

// Subscribe returns a subscription that delivers replay, then the events
// Deliver is given with an ID above after, until ctx ends, Close, End or
// the terminal event. Its channel holds the replay and buffer more events:
// a subscriber that falls further behind is cut with ErrSlow.
func (f *Fanout) Subscribe(ctx context.Context, after int64, replay []Event, buffer int) Subscription {
	s := &fanoutSub{f: f, after: after, ch: make(chan Event, len(replay)+buffer)}
	for _, ev := range replay {
		s.ch <- ev // never blocks: the channel has room for the replay
	}
	s.idx = len(f.subs)
	f.subs = append(f.subs, s)
	// Registered under mu, so that drop, also under mu, sees stop. If
	// ctx is already done the callback waits for mu and then drops s.
	s.stop = context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.drop(s, nil)
	})
	return s
}

// Ended returns a subscription that delivers replay and ends, with err
// (nil after a run's terminal event; ErrClosed when the store closed). It
// belongs to no Fanout.
func Ended(replay []Event, err error) Subscription {
	s := &endedSub{ch: make(chan Event, len(replay)), err: err}
	for _, ev := range replay {
		s.ch <- ev
	}
	close(s.ch)
	return s
}

// Deliver sends ev to every subscription subscribed after an ID below
// ev's, and the terminal event to every subscription, without blocking:
// one whose channel is full is cut with ErrSlow. After the terminal event
// every subscription ends (Err nil).
func (f *Fanout) Deliver(ev Event, terminal bool) {
	// drop moves the last subscription into the dropped one's place, so
	// after a drop the same index is visited again.
	for i := 0; i < len(f.subs); {
		s := f.subs[i]
		// A subscription after an id not reached yet skips the events up
		// to it, but not the terminal event: every subscription ends with
		// it.
		if ev.ID > s.after || terminal {
			select {
			case s.ch <- ev:
			default:
				f.drop(s, ErrSlow)
				continue
			}
		}
		if terminal {
			f.drop(s, nil)
			continue
		}
		i++
	}
}

// End ends every subscription with err.
func (f *Fanout) End(err error) {
	for len(f.subs) > 0 {
		f.drop(f.subs[len(f.subs)-1], err)
	}
}

// Len returns the number of live subscriptions.
func (f *Fanout) Len() int { return len(f.subs) }

// drop ends subscription s with err, unless it ended already.
func (f *Fanout) drop(s *fanoutSub, err error) {
	if s.idx < 0 {
		return
	}
	last := len(f.subs) - 1
	f.subs[s.idx] = f.subs[last]
	f.subs[s.idx].idx = s.idx
	f.subs[last] = nil
	f.subs = f.subs[:last]
	s.idx = -1
	s.stop()
	s.err = err
	close(s.ch)
}

// fanoutSub is a live Subscription of a Fanout; f.mu guards err, stop and
// idx.
type fanoutSub struct {
	f     *Fanout
	ch    chan Event
	after int64 // live events with ID <= after are skipped
	stop  func() bool
	idx   int // index in f.subs; -1 once ended
	err   error
}

func (s *fanoutSub) Events() <-chan Event { return s.ch }

func (s *fanoutSub) Err() error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.err
}

func (s *fanoutSub) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.drop(s, nil)
}

// endedSub is a Subscription that ended when it was made.
type endedSub struct {
	ch  chan Event
	err error
}

func (s *endedSub) Events() <-chan Event { return s.ch }
func (s *endedSub) Err() error           { return s.err }
func (s *endedSub) Close()               {}
