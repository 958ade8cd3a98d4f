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
// The hash also holds the run's summary, which List reads instead of the
// snapshot.
//
// The runs kept together have a size cap (Options.MaxBytes): each run's
// size (its snapshot and the names and data of the events appended to it)
// is counted in one hash, their sum in one counter, and the finished runs
// are a sorted set in the order they finished. Creating or finishing a run
// drops the finished runs that expired, then, while the sum is past the
// cap, the runs that finished first, keys and all.
//
// Live events are read once per replica and run: the first subscriber of a
// run on this replica starts one blocking XREAD loop on the run's stream,
// on one connection, and every subscriber of the run on this replica is fed
// from it by non-blocking sends, as in runs/memory (runs.Fanout): a
// subscriber that falls more than Buffer events behind is cut with
// runs.ErrSlow and resumes by id. The loop ends after the terminal event,
// or soon after its last subscriber left.
//
// Cancel sets a flag in the run's hash and publishes the run's id on one
// pub/sub channel; each replica holds one subscription to it, for the runs
// it watches (Cancelled), and reads the flags again whenever that
// subscription is made again after a lost connection.
//
// The Store that creates a run owns it: it holds the run's lease, a key
// with a time to live (Options.Lease) that it renews every third of it,
// until the run's terminal event. Every Store with an Options.Abandon
// looks, as often, for running runs whose lease is gone: their owner
// stopped (it was killed, or lost Redis for longer than the lease). It
// ends such a run with the terminal event and snapshot Abandon makes, in
// one script that first checks that the run still runs and the lease is
// still gone, so one Store alone ends it, and the run's subscribers on
// every replica get its end. A run ends so within Lease plus a third of it
// after its owner's last renewal.
//
// Append and Finish retry what Redis did not answer (a restart, a lost
// connection) with backoff, for Options.Retry; a retry first looks
// whether the event was added already, so no event is written twice. An
// append that still fails gives its error, and the owner no longer renews
// the lease of a run whose Finish failed so: once Redis answers again, the
// run is ended by a Store's janitor rather than left running.
package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/retry"
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
	// defaultLease is Options.Lease's default.
	defaultLease = 10 * time.Second
	// defaultRetry is Options.Retry's default.
	defaultRetry = 10 * time.Second
	// dedupWindow is how many of a stream's latest entries a retried
	// append looks through for its own event: more than the appends of
	// one run that are under way at once.
	dedupWindow = 64
	// defaultMaxBytes is Options.MaxBytes's default.
	defaultMaxBytes = 256 << 20
)

// AbandonedReason is the reason a Store's janitor gives Abandon for a run
// whose owner's lease expired.
const AbandonedReason = "replica running this loop stopped (lease expired)"

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
	// MaxBytes caps the bytes of the runs kept in Redis by every Store of
	// the same Prefix (snapshots, and the names and data of the events
	// appended, trimmed ones included); 0 means 256 MiB. Past it, when a
	// run is created or finished, the runs that finished first are
	// dropped before their TTL; running runs stay.
	MaxBytes int64
	// Summarize makes the summaries List gives; nil keeps the snapshots.
	Summarize runs.Summarize
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
	// Lease is the time to live of the lease the Store holds on each
	// running run it created; 0 means 10s. The Store renews its leases,
	// and its janitor (with Abandon) looks for expired ones, every third
	// of it. Stores sharing runs should use the same Lease.
	Lease time.Duration
	// Abandon, if set, makes the Store's janitor end running runs whose
	// lease expired: given the run's id, latest snapshot and a reason
	// (AbandonedReason), it returns the run's terminal event (name and
	// data) and final snapshot. Nil leaves such runs to the other Stores.
	Abandon func(id string, snapshot json.RawMessage, reason string) (name string, data, final json.RawMessage)
	// Retry is how long Append and Finish retry when Redis does not
	// answer, with backoff; 0 means 10s, a negative value no retry.
	Retry time.Duration
}

// Store is the runs.Store kept in Redis. Use New; the zero value is not
// usable.
type Store struct {
	c         *goredis.Client
	reads     *goredis.Client // see Options.Reads
	maxEvents int
	ttl       time.Duration
	buffer    int
	maxBytes  int64
	summarize runs.Summarize
	prefix    string
	block     time.Duration
	now       func() time.Time
	observe   func(op string, d time.Duration, err error)
	lease     time.Duration
	abandon   func(id string, snapshot json.RawMessage, reason string) (string, json.RawMessage, json.RawMessage)
	retry     time.Duration
	backoff   retry.Upstream // the waits between tries after a Redis error
	token     string         // this Store's leases and appends carry it
	ops       atomic.Int64   // numbers this Store's appends, for dedup

	hmu  sync.Mutex          // guards held
	held map[string]struct{} // the runs whose lease this Store renews

	ctx    context.Context // ends on Close; bounds the store's goroutines
	stop   context.CancelFunc
	wg     sync.WaitGroup // the live loops and the cancellation feed
	closed atomic.Bool

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
		maxBytes:  o.MaxBytes,
		summarize: o.Summarize,
		prefix:    o.Prefix,
		block:     o.Block,
		now:       o.Now,
		observe:   o.Observe,
		lease:     o.Lease,
		abandon:   o.Abandon,
		retry:     o.Retry,
		backoff:   retry.Upstream{BaseDelay: 50 * time.Millisecond, MaxDelay: 2 * time.Second},
		held:      make(map[string]struct{}),
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
	if s.maxBytes <= 0 {
		s.maxBytes = defaultMaxBytes
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
	if s.lease <= 0 {
		s.lease = defaultLease
	}
	if s.retry == 0 {
		s.retry = defaultRetry
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	s.token = hex.EncodeToString(b[:])
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.keepLeases()
	return s
}

// metaKey is the hash of run id; eventsKey its stream. The braces make
// both one hash slot.
func (s *Store) metaKey(id string) string   { return s.prefix + "run:{" + id + "}" }
func (s *Store) eventsKey(id string) string { return s.prefix + "run:{" + id + "}:events" }

// leaseKey holds the token of the Store that owns run id, while it runs.
func (s *Store) leaseKey(id string) string { return s.prefix + "run:{" + id + "}:lease" }

// runningKey is the set of the ids of running runs, which janitors scan.
func (s *Store) runningKey() string { return s.prefix + "runs:running" }

// seqKey numbers runs in the order they are created; indexKey is the
// sorted set of run ids by that number.
func (s *Store) seqKey() string   { return s.prefix + "runs:seq" }
func (s *Store) indexKey() string { return s.prefix + "runs" }

// sizesKey is the hash of each kept run's size, bytesKey their sum,
// finishedKey the sorted set of finished runs in the order they finished,
// which finishSeqKey numbers.
func (s *Store) sizesKey() string     { return s.prefix + "runs:sizes" }
func (s *Store) bytesKey() string     { return s.prefix + "runs:bytes" }
func (s *Store) finishedKey() string  { return s.prefix + "runs:finished" }
func (s *Store) finishSeqKey() string { return s.prefix + "runs:finished:seq" }

// summary is the summary of snapshot ("" for none).
func (s *Store) summary(snapshot json.RawMessage) string {
	if s.summarize == nil || snapshot == nil {
		return string(snapshot)
	}
	return string(s.summarize(snapshot))
}

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

// sizes is the prelude of the scripts that change what a run holds; ks
// names the keys {sizes, sum, finished, index}. grow counts n more bytes
// for run id; forget no longer counts run id, nor holds it finished. evict
// drops, in the order they finished, the finished runs that expired by now
// (ms) or whose keys Redis expired, then, while the sum is past max, the
// next ones: their keys, their place in the index, their size. The keys
// of a run it drops are made from prefix.
const sizes = `
local function grow(ks, id, n)
  if n ~= 0 then
    redis.call('HINCRBY', ks[1], id, n)
    redis.call('INCRBY', ks[2], n)
  end
end
local function forget(ks, id)
  redis.call('DECRBY', ks[2], tonumber(redis.call('HGET', ks[1], id) or 0))
  redis.call('HDEL', ks[1], id)
  redis.call('ZREM', ks[3], id)
end
local function evict(ks, now, max, prefix)
  local function drop(id)
    forget(ks, id)
    redis.call('ZREM', ks[4], id)
    local k = prefix .. 'run:{' .. id .. '}'
    redis.call('DEL', k, k .. ':events')
  end
  while true do
    local first = redis.call('ZRANGE', ks[3], 0, 0)
    if #first == 0 then return end
    local exp = redis.call('HGET', prefix .. 'run:{' .. first[1] .. '}', 'exp')
    if exp and now < tonumber(exp) and tonumber(redis.call('GET', ks[2]) or 0) <= max then return end
    drop(first[1])
  end
end
`

// createScript also numbers the run in the order of creation and indexes
// it by that number, for list, takes the run's lease, adds it to the
// running runs and counts its size; then it evicts. The size of an
// expired run of the same id no longer counts. KEYS meta, events,
// sequence, index, lease, running, sizes, sum, finished; ARGV now,
// snapshot ("" for none), run id, token, lease (ms), summary, max bytes,
// prefix.
var createScript = goredis.NewScript(alive + sizes + `
if alive(tonumber(ARGV[1])) then return redis.error_reply('` + errExists + `') end
local ks = {KEYS[7], KEYS[8], KEYS[9], KEYS[4]}
forget(ks, ARGV[3])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[5])
redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[5])
redis.call('SADD', KEYS[6], ARGV[3])
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'last', 0, 'seq', seq)
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'snap', ARGV[2], 'sum', ARGV[6]) end
redis.call('ZADD', KEYS[4], seq, ARGV[3])
grow(ks, ARGV[3], #ARGV[2])
evict(ks, tonumber(ARGV[1]), tonumber(ARGV[7]), ARGV[8])
return 1
`)

// setSnapshotScript: KEYS meta, sizes, sum; ARGV now, snapshot ("" for
// none), summary, run id. A run a janitor ended ('lost') keeps the
// snapshot that says why: its late owner's would hide it.
var setSnapshotScript = goredis.NewScript(alive + sizes + `
if not alive(tonumber(ARGV[1])) then return redis.error_reply('` + errNotFound + `') end
if redis.call('HEXISTS', KEYS[1], 'lost') == 1 then return redis.error_reply('` + errFinished + `') end
local n = #ARGV[2] - redis.call('HSTRLEN', KEYS[1], 'snap')
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'snap', ARGV[2], 'sum', ARGV[3])
else
  redis.call('HDEL', KEYS[1], 'snap', 'sum')
end
grow({KEYS[2], KEYS[3]}, ARGV[4], n)
return 1
`)

// addArgs name the event a script adds, and the run's state that changes
// with it: the one argument of appendScript and abandonScript, encoded
// with encoding/json and decoded with cjson. Data and Snapshot are JSON
// texts, "" for none.
type addArgs struct {
	Now       int64  `json:"now"` // ms, by the store's clock
	ID        string `json:"id"`  // the run's
	Name      string `json:"name"`
	Data      string `json:"data,omitempty"`
	Terminal  bool   `json:"terminal,omitempty"`
	Snapshot  string `json:"snapshot,omitempty"` // replaces the run's with the terminal event
	Summary   string `json:"summary,omitempty"`  // the snapshot's
	MaxEvents int    `json:"maxEvents"`          // caps the stream
	MaxBytes  int64  `json:"maxBytes"`           // caps the kept runs' bytes
	Prefix    string `json:"prefix"`             // of the keys of runs to evict
	ExpiresAt int64  `json:"expiresAt"`          // when a finished run expires, ms by the store's clock
	TTL       int64  `json:"ttl"`                // ms, when its keys expire in Redis
	Op        string `json:"op,omitempty"`       // names the append, for a retry to find
	Retry     bool   `json:"retry,omitempty"`    // look for Op among the latest entries first
}

// String is a's JSON text, for a script's ARGV.
func (a addArgs) String() string {
	b, _ := json.Marshal(a) // strings, numbers and booleans: it cannot fail
	return string(b)
}

// add is the prelude of the scripts that add an event: it decodes their
// addArgs from ARGV[1], adds the event to the stream of KEYS[2] and counts
// its size (KEYS[5] sizes, KEYS[6] sum). For the terminal one it also
// marks the run of KEYS[1] finished, sets its snapshot and its keys'
// expiry, drops its lease (KEYS[3]), takes it out of the running runs
// (KEYS[4]) and into the finished ones (KEYS[7], numbered by KEYS[9]), and
// evicts (KEYS[8] index). The event's entry carries the op, so that a
// retry finds it.
const add = sizes + `
local a = cjson.decode(ARGV[1])
local ks = {KEYS[5], KEYS[6], KEYS[7], KEYS[8]}
local function add()
  local size = #a.name + #(a.data or '')
  local n = redis.call('HINCRBY', KEYS[1], 'last', 1)
  local x = {'XADD', KEYS[2], 'MAXLEN', a.maxEvents, n .. '-0', 'n', a.name}
  if a.data then
    table.insert(x, 'd')
    table.insert(x, a.data)
  end
  if a.terminal then
    table.insert(x, 't')
    table.insert(x, '1')
  end
  if a.op then
    table.insert(x, 'o')
    table.insert(x, a.op)
  end
  redis.call(unpack(x))
  if a.terminal then
    redis.call('HSET', KEYS[1], 'exp', a.expiresAt)
    if a.snapshot then
      size = size + #a.snapshot - redis.call('HSTRLEN', KEYS[1], 'snap')
      redis.call('HSET', KEYS[1], 'snap', a.snapshot, 'sum', a.summary or '')
    end
    redis.call('PEXPIRE', KEYS[1], a.ttl)
    redis.call('PEXPIRE', KEYS[2], a.ttl)
    redis.call('DEL', KEYS[3])
    redis.call('SREM', KEYS[4], a.id)
    redis.call('ZADD', KEYS[7], redis.call('INCR', KEYS[9]), a.id)
  end
  grow(ks, a.id, size)
  if a.terminal then evict(ks, a.now, a.maxBytes, a.prefix) end
  return n
end
`

// appendScript adds an event as add does, to a running run. KEYS meta,
// events, lease, running, sizes, sum, finished, index, finish numbers;
// ARGV addArgs. A retry first looks for its op
// among the latest entries and answers the id of the entry it finds: the
// first try added it, but its answer was lost. It returns the event's id.
var appendScript = goredis.NewScript(alive + add + `
if a.retry then
  for _, e in ipairs(redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', ` + strconv.Itoa(dedupWindow) + `)) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'o' and f[i + 1] == a.op then
        return tonumber(string.match(e[1], '^(%d+)'))
      end
    end
  end
end
if not alive(a.now) then return redis.error_reply('` + errNotFound + `') end
if redis.call('HEXISTS', KEYS[1], 'exp') == 1 then return redis.error_reply('` + errFinished + `') end
return add()
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
// a run is missing, exists or finished is a success of Redis's. An error
// that says Redis did not answer is also runs.ErrUnavailable.
func (s *Store) timed(op string, f func() error) error {
	start := time.Now()
	err := f()
	failed := err
	if scriptErr(err) != err {
		failed = nil
	}
	s.observe(op, time.Since(start), failed)
	if failed != nil && retryable(failed) {
		return fmt.Errorf("%w: %w", runs.ErrUnavailable, err)
	}
	return err
}

// Create adds a running run with an empty log, and takes its lease: the
// Store renews it until the run's terminal event. An id still kept gives
// runs.ErrExists; the keys of an expired run are replaced.
func (s *Store) Create(ctx context.Context, id string, snapshot json.RawMessage) error {
	if s.closed.Load() {
		// It could not renew the lease.
		return fmt.Errorf("runs: create %q: %w", id, runs.ErrClosed)
	}
	err := s.timed("create", func() error {
		return createScript.Run(ctx, s.c,
			[]string{s.metaKey(id), s.eventsKey(id), s.seqKey(), s.indexKey(), s.leaseKey(id), s.runningKey(), s.sizesKey(), s.bytesKey(), s.finishedKey()},
			s.nowMS(), string(snapshot), id, s.token, s.lease.Milliseconds(), s.summary(snapshot), s.maxBytes, s.prefix).Err()
	})
	if err != nil {
		return fmt.Errorf("runs: create %q: %w", id, scriptErr(err))
	}
	s.hold(id)
	return nil
}

// SetSnapshot replaces the run's snapshot.
func (s *Store) SetSnapshot(ctx context.Context, id string, snapshot json.RawMessage) error {
	err := s.timed("set_snapshot", func() error {
		return setSnapshotScript.Run(ctx, s.c, []string{s.metaKey(id), s.sizesKey(), s.bytesKey()}, s.nowMS(), string(snapshot), s.summary(snapshot), id).Err()
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
	// value is the fourth field read, if any: snap or sum.
	value json.RawMessage
}

// parseMeta reads HMGET last, exp, cancel and, if asked, snap or sum; a
// run not kept at now gives runs.ErrNotFound.
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
	if len(v) > 3 {
		if x, ok := v[3].(string); ok {
			m.value = json.RawMessage(x)
		}
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
	return m.value, nil
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

// append runs appendScript, and retries it while Redis does not answer, for
// s.retry: each retry looks for the event first, so it is added once.
// After the terminal event, or an error that says the run is gone or
// finished, the Store stops renewing the run's lease; so it does when a
// Finish failed for good, so that a janitor ends the run once Redis
// answers again.
func (s *Store) append(ctx context.Context, id, name string, data, snapshot json.RawMessage, terminal bool) (runs.Event, error) {
	opName := "append"
	if terminal {
		opName = "finish"
	}
	args := s.addArgs(id, name, data, snapshot, terminal)
	args.Op = s.token[:8] + "." + strconv.FormatInt(s.ops.Add(1), 36)
	deadline := time.Now().Add(s.retry)
	for attempt := 1; ; attempt++ {
		now := s.now()
		args.Now, args.ExpiresAt = now.UnixMilli(), now.Add(s.ttl).UnixMilli()
		var n int64
		err := s.timed(opName, func() error {
			var err error
			n, err = appendScript.Run(ctx, s.c, s.addKeys(id), args.String()).Int64()
			return err
		})
		if err == nil {
			if terminal {
				s.unhold(id)
			}
			return runs.Event{ID: n, Name: name, Data: bytes.Clone(data)}, nil
		}
		err = scriptErr(err)
		if errors.Is(err, runs.ErrNotFound) || errors.Is(err, runs.ErrFinished) {
			s.unhold(id)
			return runs.Event{}, err
		}
		wait := s.backoff.Delay(attempt, nil)
		if !retryable(err) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			if terminal {
				s.unhold(id)
			}
			return runs.Event{}, err
		}
		args.Retry = true
		if retry.Sleep(ctx, wait) != nil {
			return runs.Event{}, errors.Join(err, ctx.Err())
		}
	}
}

// retryable reports whether err says Redis did not answer, or not yet
// (it is loading its data after a restart), rather than refused the
// command.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re goredis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		return strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "READONLY") || strings.HasPrefix(msg, "MASTERDOWN")
	}
	return true
}

func (s *Store) nowMS() int64 { return s.now().UnixMilli() }

// addArgs are the arguments of an event to add, but for the times and
// the op.
func (s *Store) addArgs(id, name string, data, snapshot json.RawMessage, terminal bool) addArgs {
	a := addArgs{ID: id, Name: name, Data: string(data), Terminal: terminal, MaxEvents: s.maxEvents, MaxBytes: s.maxBytes,
		Prefix: s.prefix, TTL: s.ttl.Milliseconds()}
	if terminal && snapshot != nil {
		a.Snapshot, a.Summary = string(snapshot), s.summary(snapshot)
	}
	return a
}

// addKeys are the keys of the scripts that add an event to run id.
func (s *Store) addKeys(id string) []string {
	return []string{s.metaKey(id), s.eventsKey(id), s.leaseKey(id), s.runningKey(), s.sizesKey(), s.bytesKey(), s.finishedKey(), s.indexKey(),
		s.finishSeqKey()}
}

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

// Close ends every subscription with runs.ErrClosed, stops the live loops,
// the cancellation feed, the renewal of leases and the janitor, and waits
// for them. Runs stay in Redis: a run the Store created and did not finish
// is ended by another Store's janitor once its lease expired. Later
// Subscribes and Creates give runs.ErrClosed. It does not close the
// client.
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
		f.fan.End(runs.ErrClosed)
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
