package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/runs"
)

// watch is one Cancelled channel.
type watch struct{ ch chan struct{} }

// Cancelled returns a channel closed once Cancel was called for the run, on
// any replica. The watch is registered and the store's cancellation feed
// listens before the run's flag is read, so a Cancel is seen whether it
// came before or after. When ctx ends the watch is dropped and the channel
// never closes.
func (s *Store) Cancelled(ctx context.Context, id string) (<-chan struct{}, error) {
	if err := s.listen(ctx); err != nil {
		return nil, fmt.Errorf("runs: watch %q for cancellation: %w", id, err)
	}
	w := &watch{ch: make(chan struct{})}
	s.wmu.Lock()
	if s.watches[id] == nil {
		s.watches[id] = make(map[*watch]struct{})
	}
	s.watches[id][w] = struct{}{}
	s.wmu.Unlock()
	m, err := s.readMeta(ctx, id)
	if err != nil {
		s.unwatch(id, w)
		return nil, fmt.Errorf("runs: watch %q for cancellation: %w", id, err)
	}
	if m.cancelled {
		s.fire(id)
	}
	context.AfterFunc(ctx, func() { s.unwatch(id, w) })
	return w.ch, nil
}

// unwatch drops w, unless it fired.
func (s *Store) unwatch(id string, w *watch) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	delete(s.watches[id], w)
	if len(s.watches[id]) == 0 {
		delete(s.watches, id)
	}
}

// fire closes and drops every watch of run id.
func (s *Store) fire(id string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for w := range s.watches[id] {
		close(w.ch)
	}
	delete(s.watches, id)
}

// listen starts the cancellation feed once and waits until it listens, or
// until ctx ends.
func (s *Store) listen(ctx context.Context) error {
	s.feedOnce.Do(func() {
		feed := s.reads.Subscribe(s.ctx)
		s.wmu.Lock()
		s.feed = feed
		closed := s.closed.Load()
		s.wmu.Unlock()
		if closed { // Close may have looked for the feed already
			_ = feed.Close()
			return
		}
		s.wg.Add(1)
		go s.runFeed(feed)
	})
	select {
	case <-s.feedReady:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return runs.ErrClosed
	}
}

// runFeed reads the cancellation channel until Close closes feed. Each
// time the subscription is made (at first, and again after go-redis
// reconnected it) every watched run's flag is read again, so a Cancel
// published while the connection was down is not lost.
func (s *Store) runFeed(feed *goredis.PubSub) {
	defer s.wg.Done()
	ready := false
	failures := 0
	if err := feed.Subscribe(s.ctx, s.cancelChannel()); err != nil {
		s.observe("subscribe_cancel", 0, err)
	}
	for {
		msg, err := feed.Receive(s.ctx)
		if err != nil {
			if s.closed.Load() {
				return
			}
			s.observe("receive_cancel", 0, err)
			failures++
			if retry.Sleep(s.ctx, s.backoff.Delay(failures, nil)) != nil {
				return
			}
			continue
		}
		failures = 0
		switch m := msg.(type) {
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			s.recheck()
			if !ready {
				ready = true
				close(s.feedReady)
			}
		case *goredis.Message:
			s.fire(m.Payload)
		}
	}
}

// recheck reads the cancel flag of every watched run.
func (s *Store) recheck() {
	s.wmu.Lock()
	ids := make([]string, 0, len(s.watches))
	for id := range s.watches {
		ids = append(ids, id)
	}
	s.wmu.Unlock()
	for _, id := range ids {
		if m, err := s.readMeta(s.ctx, id); err == nil && m.cancelled {
			s.fire(id)
		}
	}
}
