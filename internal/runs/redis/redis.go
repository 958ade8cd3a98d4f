// Package redis is the runs.Store kept in Redis, shared by every replica
// that uses the same Redis.
//
// A run is two keys with the same hash tag, so both live on one node of a
// cluster: a hash (its snapshot, the id of its last event, when it expires
// once finished, whether it was asked to cancel) and a stream of its
// events, whose entry ids are "<event id>-0". A subscriber that resumes
// after an event id therefore reads the stream after that position, on any
// replica. Appending, finishing and cancelling are Lua scripts: the event
// and the run's state change in one step. The stream is capped at
// MaxEvents entries, exactly; a finished run's keys expire after the TTL.
//
// Live events are read once per replica and run: the first subscriber of a
// run on this replica starts one blocking XREAD loop on the run's stream,
// on one connection, and every subscriber of the run on this replica is fed
// from it by non-blocking sends, as in runs/memory: a subscriber that falls
// more than Buffer events behind is cut with runs.ErrSlow and resumes by
// id. The loop ends after the terminal event, or soon after its last
// subscriber left.
//
// Cancel sets a flag in the run's hash and publishes the run's id on one
// pub/sub channel; each replica holds one subscription to it, for the runs
// it watches (Cancelled), and reads the flags again whenever that
// subscription is made again after a lost connection.
package redis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/runs"
)

// Defaults of Options.
const (
	defaultMaxEvents = 10000
	defaultTTL       = time.Hour
	defaultBuffer    = 256
	defaultPrefix    = "sampled:"
	defaultBlock     = 2 * time.Second
	// readCount is how many entries one XREAD of a live loop returns at
	// most.
	readCount = 512
	// maxBackoff bounds the wait between retries of a live loop or the
	// cancellation feed after a Redis error.
	maxBackoff = 2 * time.Second
)

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// MaxEvents is the number of events kept per run; 0 means 10000. Older
	// entries are trimmed from the stream, and replaying from before them
	// gives runs.ErrExpired.
	MaxEvents int
	// TTL is how long a finished run is kept after its terminal event; 0
	// means 1h. Its keys expire in Redis after that time.
	TTL time.Duration
	// Buffer is the number of live events a subscriber may fall behind
	// before it is cut with runs.ErrSlow; 0 means 256.
	Buffer int
	// Prefix starts every key and channel name; "" means "sampled:".
	// Stores sharing runs use the same Prefix.
	Prefix string
	// Block is how long one blocking read of a live loop waits for new
	// events before it looks whether it still has subscribers; 0 means
	// 2s. A loop whose last subscriber left ends within about Block.
	Block time.Duration
	// Now is the clock by which finished runs expire for the Store's
	// methods; nil means time.Now. Redis removes the keys of a finished
	// run after TTL by its own clock, whatever Now says.
	Now func() time.Time
	// Reads, if set, is the client of the live loops' blocking reads and
	// of the cancellation feed, each of which holds a connection while it
	// runs; nil means the client given to New. A client of its own keeps
	// a replica that follows many runs from starving Append and the other
	// commands of connections.
	Reads *goredis.Client
	// Observe, if set, is called after each Redis operation with its name
	// (e.g. "append", "subscribe", "xread"), how long it took and its
	// error (nil on success; a read that timed out with nothing new is a
	// success).
	Observe func(op string, d time.Duration, err error)
}

// Store is the runs.Store kept in Redis. Use New; the zero value is not
// usable.
type Store struct {
	c         *goredis.Client
	reads     *goredis.Client // see Options.Reads
	maxEvents int
	ttl       time.Duration
	buffer    int
	prefix    string
	block     time.Duration
	now       func() time.Time
	observe   func(op string, d time.Duration, err error)

	ctx    context.Context // ends on Close; bounds the store's goroutines
	stop   context.CancelFunc
	wg     sync.WaitGroup // the live loops and the cancellation feed
	closed atomic.Bool
	subs   atomic.Int64 // open (live) subscriptions

	mu        sync.Mutex // guards followers, and each follower's refs
	followers map[string]*follower

	feedOnce  sync.Once
	feedReady chan struct{} // closed once the cancellation feed listens
	feed      *goredis.PubSub
	wmu       sync.Mutex // guards watches
	watches   map[string]map[*watch]struct{}
}

var _ runs.Store = (*Store)(nil)

// New returns a Store on c. The caller keeps c (and Options.Reads) and
// closes them after the Store. Every live loop holds a connection of
// Options.Reads (else c) while it runs, and the cancellation feed one
// more: size that client's pool for the runs a replica follows at once.
func New(c *goredis.Client, o Options) *Store {
	s := &Store{
		c:         c,
		reads:     o.Reads,
		maxEvents: o.MaxEvents,
		ttl:       o.TTL,
		buffer:    o.Buffer,
		prefix:    o.Prefix,
		block:     o.Block,
		now:       o.Now,
		observe:   o.Observe,
		followers: make(map[string]*follower),
		feedReady: make(chan struct{}),
		watches:   make(map[string]map[*watch]struct{}),
	}
	if s.maxEvents <= 0 {
		s.maxEvents = defaultMaxEvents
	}
	if s.ttl <= 0 {
		s.ttl = defaultTTL
	}
	if s.buffer <= 0 {
		s.buffer = defaultBuffer
	}
	if s.prefix == "" {
		s.prefix = defaultPrefix
	}
	if s.block <= 0 {
		s.block = defaultBlock
	}
	if s.reads == nil {
		s.reads = c
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.observe == nil {
		s.observe = func(string, time.Duration, error) {}
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s
}

// metaKey is the hash of run id; eventsKey its stream. The braces make
// both one hash slot.
func (s *Store) metaKey(id string) string   { return s.prefix + "run:{" + id + "}" }
func (s *Store) eventsKey(id string) string { return s.prefix + "run:{" + id + "}:events" }

// seqKey numbers runs in the order they are created; indexKey is the
// sorted set of run ids by that number.
func (s *Store) seqKey() string   { return s.prefix + "runs:seq" }
func (s *Store) indexKey() string { return s.prefix + "runs" }

// cancelChannel is the pub/sub channel Cancel publishes run ids on.
func (s *Store) cancelChannel() string { return s.prefix + "cancel" }

// Script errors; the scripts answer them as error replies.
const (
	errNotFound = "SAMPLED_NOTFOUND"
	errExists   = "SAMPLED_EXISTS"
	errFinished = "SAMPLED_FINISHED"
)

// alive is the prelude of the scripts: whether the run of KEYS[1] is kept
// at now (ms), i.e. exists and is running or finished less than the TTL
// ago.
const alive = `
local function alive(now)
  local v = redis.call('HMGET', KEYS[1], 'last', 'exp')
  if not v[1] then return false end
  return not v[2] or now < tonumber(v[2])
end
`

// createScript also numbers the run in the order of creation and indexes
// it by that number, for list. KEYS meta, events, sequence, index; ARGV
// now, has snapshot, snapshot, run id.
var createScript = goredis.NewScript(alive + `
if alive(tonumber(ARGV[1])) then return redis.error_reply('` + errExists + `') end
redis.call('DEL', KEYS[1], KEYS[2])
local seq = redis.call('INCR', KEYS[3])
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'last', 0, 'seq', seq, 'snap', ARGV[3])
else
  redis.call('HSET', KEYS[1], 'last', 0, 'seq', seq)
end
redis.call('ZADD', KEYS[4], seq, ARGV[4])
return 1
`)

// setSnapshotScript: KEYS meta; ARGV now, has snapshot, snapshot.
var setSnapshotScript = goredis.NewScript(alive + `
if not alive(tonumber(ARGV[1])) then return redis.error_reply('` + errNotFound + `') end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'snap', ARGV[3])
else
  redis.call('HDEL', KEYS[1], 'snap')
end
return 1
`)

// appendScript adds an event to the stream and, for the terminal one,
// marks the run finished, sets its snapshot and its keys' expiry, in one
// step. KEYS meta, events; ARGV now, name, has data, data, terminal, has
// snapshot, snapshot, max events, expires at (ms, by the store's clock),
// ttl (ms). It returns the event's id.
var appendScript = goredis.NewScript(alive + `
if not alive(tonumber(ARGV[1])) then return redis.error_reply('` + errNotFound + `') end
if redis.call('HEXISTS', KEYS[1], 'exp') == 1 then return redis.error_reply('` + errFinished + `') end
local id = redis.call('HINCRBY', KEYS[1], 'last', 1)
local add = {'XADD', KEYS[2], 'MAXLEN', ARGV[8], id .. '-0', 'n', ARGV[2]}
if ARGV[3] == '1' then
  table.insert(add, 'd')
  table.insert(add, ARGV[4])
end
if ARGV[5] == '1' then
  table.insert(add, 't')
  table.insert(add, '1')
end
redis.call(unpack(add))
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'exp', ARGV[9])
  if ARGV[6] == '1' then redis.call('HSET', KEYS[1], 'snap', ARGV[7]) end
  redis.call('PEXPIRE', KEYS[1], ARGV[10])
  redis.call('PEXPIRE', KEYS[2], ARGV[10])
end
return id
`)

// cancelScript: KEYS meta; ARGV now, channel, run id.
var cancelScript = goredis.NewScript(alive + `
if not alive(tonumber(ARGV[1])) then return redis.error_reply('` + errNotFound + `') end
if redis.call('HEXISTS', KEYS[1], 'exp') == 1 then return redis.error_reply('` + errFinished + `') end
if redis.call('HSETNX', KEYS[1], 'cancel', 1) == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return 1
`)

// scriptErr maps a script's error reply to the runs error it stands for.
func scriptErr(err error) error {
	if err == nil {
		return nil
	}
	var re goredis.Error
	if errors.As(err, &re) {
		switch strings.TrimPrefix(re.Error(), "ERR ") { // Redis adds ERR to a bare code
		case errNotFound:
			return runs.ErrNotFound
		case errExists:
			return runs.ErrExists
		case errFinished:
			return runs.ErrFinished
		}
	}
	return err
}

// timed runs f as Redis operation op, for Observe. A script's answer that
// a run is missing, exists or finished is a success of Redis's.
func (s *Store) timed(op string, f func() error) error {
	start := time.Now()
	err := f()
	failed := err
	if scriptErr(err) != err {
		failed = nil
	}
	s.observe(op, time.Since(start), failed)
	return err
}

// presence returns "1" and b as a string, or "0" and "" when b is nil.
func presence(b json.RawMessage) (string, string) {
	if b == nil {
		return "0", ""
	}
	return "1", string(b)
}

// Create adds a running run with an empty log. An id still kept gives
// runs.ErrExists; the keys of an expired run are replaced.
func (s *Store) Create(ctx context.Context, id string, snapshot json.RawMessage) error {
	has, snap := presence(snapshot)
	err := s.timed("create", func() error {
		return createScript.Run(ctx, s.c, []string{s.metaKey(id), s.eventsKey(id), s.seqKey(), s.indexKey()}, s.nowMS(), has, snap, id).Err()
	})
	if err != nil {
		return fmt.Errorf("runs: create %q: %w", id, scriptErr(err))
	}
	return nil
}

// SetSnapshot replaces the run's snapshot.
func (s *Store) SetSnapshot(ctx context.Context, id string, snapshot json.RawMessage) error {
	has, snap := presence(snapshot)
	err := s.timed("set_snapshot", func() error {
		return setSnapshotScript.Run(ctx, s.c, []string{s.metaKey(id)}, s.nowMS(), has, snap).Err()
	})
	if err != nil {
		return fmt.Errorf("runs: set snapshot of %q: %w", id, scriptErr(err))
	}
	return nil
}

// meta is what a run's hash says.
type meta struct {
	last      int64
	finished  bool
	cancelled bool
	snapshot  json.RawMessage
}

// parseMeta reads HMGET last, exp, cancel, snap; a run not kept at now
// gives runs.ErrNotFound.
func (s *Store) parseMeta(v []any) (meta, error) {
	var m meta
	last, ok := v[0].(string)
	if !ok {
		return m, runs.ErrNotFound
	}
	n, err := strconv.ParseInt(last, 10, 64)
	if err != nil {
		return m, fmt.Errorf("last event id %q: %w", last, err)
	}
	m.last = n
	if exp, ok := v[1].(string); ok {
		at, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return m, fmt.Errorf("expiry %q: %w", exp, err)
		}
		if s.now().UnixMilli() >= at {
			return m, runs.ErrNotFound
		}
		m.finished = true
	}
	_, m.cancelled = v[2].(string)
	if snap, ok := v[3].(string); ok {
		m.snapshot = json.RawMessage(snap)
	}
	return m, nil
}

// readMeta reads the run's hash.
func (s *Store) readMeta(ctx context.Context, id string) (meta, error) {
	var v []any
	err := s.timed("read_meta", func() error {
		var err error
		v, err = s.c.HMGet(ctx, s.metaKey(id), "last", "exp", "cancel", "snap").Result()
		return err
	})
	if err != nil {
		return meta{}, err
	}
	return s.parseMeta(v)
}

// Snapshot returns the run's latest snapshot.
func (s *Store) Snapshot(ctx context.Context, id string) (json.RawMessage, error) {
	m, err := s.readMeta(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("runs: snapshot of %q: %w", id, err)
	}
	return m.snapshot, nil
}

// Append adds an event to a running run's stream.
func (s *Store) Append(ctx context.Context, id, name string, data json.RawMessage) (runs.Event, error) {
	ev, err := s.append(ctx, id, name, data, nil, false)
	if err != nil {
		return runs.Event{}, fmt.Errorf("runs: append to %q: %w", id, err)
	}
	return ev, nil
}

// Finish appends the terminal event, replaces the snapshot (unless nil)
// and sets the run's keys to expire after the TTL, in one script.
func (s *Store) Finish(ctx context.Context, id, name string, data, snapshot json.RawMessage) (runs.Event, error) {
	ev, err := s.append(ctx, id, name, data, snapshot, true)
	if err != nil {
		return runs.Event{}, fmt.Errorf("runs: finish %q: %w", id, err)
	}
	return ev, nil
}

func (s *Store) append(ctx context.Context, id, name string, data, snapshot json.RawMessage, terminal bool) (runs.Event, error) {
	hasData, d := presence(data)
	hasSnap, snap := presence(snapshot)
	term, op := "0", "append"
	if terminal {
		term, op = "1", "finish"
	}
	now := s.now()
	var n int64
	err := s.timed(op, func() error {
		var err error
		n, err = appendScript.Run(ctx, s.c, []string{s.metaKey(id), s.eventsKey(id)},
			now.UnixMilli(), name, hasData, d, term, hasSnap, snap,
			s.maxEvents, now.Add(s.ttl).UnixMilli(), s.ttl.Milliseconds()).Int64()
		return err
	})
	if err != nil {
		return runs.Event{}, scriptErr(err)
	}
	return runs.Event{ID: n, Name: name, Data: bytes.Clone(data)}, nil
}

func (s *Store) nowMS() int64 { return s.now().UnixMilli() }

// Cancel records the request in the run's hash and publishes it to every
// replica.
func (s *Store) Cancel(ctx context.Context, id string) error {
	err := s.timed("cancel", func() error {
		return cancelScript.Run(ctx, s.c, []string{s.metaKey(id)}, s.nowMS(), s.cancelChannel(), id).Err()
	})
	if err != nil {
		return fmt.Errorf("runs: cancel %q: %w", id, scriptErr(err))
	}
	return nil
}

// Subscribers returns the number of open subscriptions that follow live
// events on this Store.
func (s *Store) Subscribers() int { return int(s.subs.Load()) }

// Close ends every subscription with runs.ErrClosed, stops the live loops
// and the cancellation feed and waits for them. Runs stay in Redis; later
// Subscribes give runs.ErrClosed. It does not close the client.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	fs := make([]*follower, 0, len(s.followers))
	for _, f := range s.followers {
		fs = append(fs, f)
	}
	s.mu.Unlock()
	for _, f := range fs {
		f.mu.Lock()
		for len(f.subs) > 0 {
			s.drop(f, f.subs[len(f.subs)-1], runs.ErrClosed)
		}
		f.mu.Unlock()
	}
	s.stop()
	for _, f := range fs {
		s.unblock(f)
	}
	s.wmu.Lock()
	feed := s.feed
	s.wmu.Unlock()
	if feed != nil {
		_ = feed.Close()
	}
	s.wg.Wait()
	return nil
}

// unblock wakes f's loop from its blocking read until the loop ended: the
// read may start just after a wake-up, so it is repeated.
func (s *Store) unblock(f *follower) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		f.mu.Lock()
		id, started := f.connID, f.started
		f.mu.Unlock()
		if !started {
			return
		}
		if id != 0 {
			// A fresh context: the store's has ended.
			_ = s.c.ClientUnblock(context.Background(), id).Err() // on c: reads may be full
		}
		select {
		case <-f.done:
			return
		case <-t.C:
		}
	}
}
