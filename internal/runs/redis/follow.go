package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/runs"
)

// follower is this replica's live loop on one run: one blocking read of the
// run's stream, fanned out to the run's subscriptions on this replica. Its
// mutex guards every field but refs, and the delivery of events.
type follower struct {
	id   string
	refs int // Subscribes under way; guarded by Store.mu

	mu      sync.Mutex
	fan     *runs.Fanout  // the live subscriptions
	pos     int64         // id of the last event read
	started bool          // the loop runs, or ran
	final   bool          // the loop read the terminal event
	gone    bool          // the loop ended or is ending: f takes no subscription
	connID  int64         // the loop's Redis connection, for CLIENT UNBLOCK; 0 when unknown
	done    chan struct{} // closed when the loop ends
}

// logState is a consistent read of a run: its hash and the events to
// replay.
type logState struct {
	meta
	first  int64 // id of the oldest entry kept; last+1 when none
	replay []runs.Event
}

// readLog reads the run's hash, the oldest entry of its stream and the
// entries after an id, in one transaction.
func (s *Store) readLog(ctx context.Context, id string, after int64) (logState, error) {
	var (
		hm         *goredis.SliceCmd
		head, rest *goredis.XMessageSliceCmd
	)
	err := s.timed("subscribe", func() error {
		_, err := s.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			hm = p.HMGet(ctx, s.metaKey(id), "last", "exp", "cancel")
			head = p.XRangeN(ctx, s.eventsKey(id), "-", "+", 1)
			rest = p.XRange(ctx, s.eventsKey(id), strconv.FormatInt(after+1, 10), "+")
			return nil
		})
		return err
	})
	if err != nil {
		return logState{}, err
	}
	var st logState
	if st.meta, err = s.parseMeta(hm.Val()); err != nil {
		return logState{}, err
	}
	st.first = st.last + 1
	if h := head.Val(); len(h) > 0 {
		ev, _, err := parseEntry(h[0])
		if err != nil {
			return logState{}, err
		}
		st.first = ev.ID
	}
	for _, m := range rest.Val() {
		ev, _, err := parseEntry(m)
		if err != nil {
			return logState{}, err
		}
		st.replay = append(st.replay, ev)
	}
	return st, nil
}

// parseEntry reads a stream entry: its event and whether it is the
// terminal one.
func parseEntry(m goredis.XMessage) (runs.Event, bool, error) {
	seq, _, _ := strings.Cut(m.ID, "-")
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return runs.Event{}, false, fmt.Errorf("runs: stream entry %q: %w", m.ID, err)
	}
	name, _ := m.Values["n"].(string)
	ev := runs.Event{ID: n, Name: name}
	if d, ok := m.Values["d"].(string); ok {
		ev.Data = json.RawMessage(d)
	}
	_, terminal := m.Values["t"]
	return ev, terminal, nil
}

// Subscribe replays the retained events with ID > after, then follows live
// ones from this replica's loop on the run; see runs.Store. The replay is
// read and the subscription registered under the loop's lock, so the loop
// delivers exactly the events after the replay. The channel holds the
// whole replay plus the Buffer.
//
// A ctx that is already done gives its error; after Close, Subscribe gives
// runs.ErrClosed.
func (s *Store) Subscribe(ctx context.Context, id string, after int64) (runs.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("runs: subscribe to %q: %w", id, err)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("runs: subscribe to %q: %w", id, runs.ErrClosed)
	}
	after = max(after, 0)
	for {
		sub, err := s.subscribe(ctx, id, after)
		if !errors.Is(err, errGone) {
			return sub, err
		}
	}
}

// errGone: the follower Subscribe found has ended its loop; a new one is
// made.
var errGone = errors.New("follower gone")

func (s *Store) subscribe(ctx context.Context, id string, after int64) (runs.Subscription, error) {
	s.mu.Lock()
	f := s.followers[id]
	if f == nil {
		f = &follower{id: id, done: make(chan struct{})}
		f.fan = runs.NewFanout(&f.mu)
		s.followers[id] = f
	}
	f.refs++
	s.mu.Unlock()
	defer s.release(f)

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		// Its loop ended (it read the terminal event, or the store
		// closed) after this Subscribe found it; if the run was created
		// again since, it needs a loop of its own.
		return nil, errGone
	}
	st, err := s.readLog(ctx, id, after)
	if err != nil {
		return nil, fmt.Errorf("runs: subscribe to %q: %w", id, err)
	}
	if after < st.last && after+1 < st.first {
		return nil, fmt.Errorf("runs: subscribe to %q after %d (oldest kept is %d): %w", id, after, st.first, runs.ErrExpired)
	}
	if st.finished && after > st.last && st.last > 0 {
		// Resumed beyond the terminal event, at an id the run never
		// reached: the terminal event is sent, so the stream still ends
		// with it.
		if st, err = s.readLog(ctx, id, st.last-1); err != nil {
			return nil, fmt.Errorf("runs: subscribe to %q: %w", id, err)
		}
	}
	if st.finished || s.closed.Load() {
		var end error
		if !st.finished {
			end = runs.ErrClosed
		}
		return runs.Ended(st.replay, end), nil
	}
	sub := f.fan.Subscribe(ctx, max(after, st.last), st.replay, s.buffer)
	if !f.started {
		f.started = true
		f.pos = st.last
		s.wg.Add(1)
		go s.follow(f)
	}
	return sub, nil
}

// release ends a Subscribe's hold on f; a follower whose loop never started
// and that has no subscription is forgotten.
func (s *Store) release(f *follower) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.refs--
	f.mu.Lock()
	idle := f.refs == 0 && !f.started && f.fan.Len() == 0
	f.mu.Unlock()
	if idle && s.followers[f.id] == f {
		delete(s.followers, f.id)
	}
}

// follow is f's live loop: it reads the run's stream after f.pos and
// delivers what it reads, until the terminal event, until no subscription
// is left, or until the store closes. A Redis error is retried with
// backoff; the subscriptions stay and get every event once Redis answers
// again.
func (s *Store) follow(f *follower) {
	defer s.wg.Done()
	defer close(f.done)
	// A connection of its own, so that Close can unblock its read by id.
	conn := s.reads.Conn()
	defer func() { _ = conn.Close() }()
	key := s.eventsKey(f.id)
	failures := 0
	for {
		if !s.keepFollowing(f) {
			return
		}
		if failures > 0 && retry.Sleep(s.ctx, s.backoff.Delay(failures, nil)) != nil {
			return
		}
		f.mu.Lock()
		pos, known := f.pos, f.connID != 0
		f.mu.Unlock()
		if !known {
			var id int64
			err := s.timed("client_id", func() error {
				var err error
				id, err = conn.ClientID(s.ctx).Result()
				return err
			})
			if err != nil {
				failures++
				_ = conn.Close()
				conn = s.reads.Conn()
				continue
			}
			f.mu.Lock()
			f.connID = id
			f.mu.Unlock()
		}
		var res []goredis.XStream
		err := s.timed("xread", func() error {
			var err error
			res, err = conn.XRead(s.ctx, &goredis.XReadArgs{
				Streams: []string{key, strconv.FormatInt(pos, 10) + "-0"},
				Count:   readCount,
				Block:   s.block,
			}).Result()
			if errors.Is(err, goredis.Nil) { // nothing new within Block, or unblocked
				err = nil
			}
			return err
		})
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			// A broken connection stays broken: take another one, and
			// ask its id.
			_ = conn.Close()
			conn = s.reads.Conn()
			f.mu.Lock()
			f.connID = 0
			f.mu.Unlock()
			failures++
			continue
		}
		failures = 0
		if len(res) == 0 {
			s.checkKept(f)
			continue
		}
		for _, st := range res {
			s.deliver(f, st.Messages)
		}
	}
}

// errVanished: a followed run's keys are gone while it was running (Redis
// restarted without its data, or they were deleted).
var errVanished = fmt.Errorf("the run's keys are gone from Redis: %w", runs.ErrNotFound)

// checkKept ends f's subscriptions with errVanished if the run's hash is
// gone, rather than let them wait for events that cannot come. It runs
// when a read found nothing new, so at most once per Block.
func (s *Store) checkKept(f *follower) {
	var n int64
	err := s.timed("exists", func() error {
		var err error
		n, err = s.c.Exists(s.ctx, s.metaKey(f.id)).Result()
		return err
	})
	if err != nil || n == 1 {
		return // an error is retried at the next quiet read
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fan.End(errVanished)
	f.final = true
}

// keepFollowing reports whether f's loop goes on; when not, f is forgotten.
func (s *Store) keepFollowing(f *follower) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !s.closed.Load() && !f.final && (f.fan.Len() > 0 || f.refs > 0) {
		return true
	}
	f.gone = true
	if s.followers[f.id] == f {
		delete(s.followers, f.id)
	}
	return false
}

// deliver hands entries read by f's loop to its subscriptions without
// blocking (runs.Fanout): a subscription whose buffer is full is cut with
// runs.ErrSlow. If entries were trimmed before the loop read them, every
// subscription is cut with runs.ErrSlow rather than skip them: it resumes
// by id and gets runs.ErrExpired or the events.
func (s *Store) deliver(f *follower, msgs []goredis.XMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		ev, terminal, err := parseEntry(m)
		if err != nil {
			f.fan.End(err)
			f.final = true
			return
		}
		if ev.ID <= f.pos {
			continue
		}
		if ev.ID != f.pos+1 {
			f.fan.End(runs.ErrSlow)
		}
		f.pos = ev.ID
		f.fan.Deliver(ev, terminal)
		if terminal {
			f.final = true
			return
		}
	}
}
