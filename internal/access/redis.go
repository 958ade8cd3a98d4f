package access

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
)

// Defaults of RedisOptions.
const (
	// DefaultLimitPrefix starts the limits' keys, as the run store's start
	// with its own "sampled:" prefix.
	DefaultLimitPrefix = "sampled:"
	// DefaultLoopLease is how long a loop counts against its key's cap
	// after its replica last renewed it: the bound on how long a replica
	// that died keeps its loops counted.
	DefaultLoopLease = 30 * time.Second
	// DefaultLimitTimeout bounds one limit check in Redis; past it the
	// check fails (and the Guard lets the request in).
	DefaultLimitTimeout = 250 * time.Millisecond
)

// RedisOptions configure RedisLimits. Zero values mean the defaults.
type RedisOptions struct {
	// Prefix starts every key; replicas sharing limits use the same one.
	Prefix string
	// Lease is how long a running loop counts without being renewed; the
	// replica running it renews it every third of it.
	Lease time.Duration
	// Timeout bounds each Redis call.
	Timeout time.Duration
	// Logger gets the failures of renewals and releases; nil discards.
	Logger *slog.Logger
	// Observe, if set, is told of each Redis call: its operation
	// (limit_rate, limit_loop_start, limit_loop_renew,
	// limit_loop_release, limit_budget_read, limit_budget_charge),
	// duration and error.
	Observe func(op string, d time.Duration, err error)
}

// RedisLimits keeps each key's request rate, running loops and budgets
// (tokens per minute, spend per day and month) in Redis, so
// that every replica using the same Redis and Prefix shares one budget per
// key. It implements SharedLimits and SharedBudgets.
//
// The rate is redis_rate's GCRA (the token bucket of the in-process
// limiter, kept as one "theoretical arrival time" per key), on Redis's
// clock, so replicas' clocks do not matter.
//
// Running loops are a sorted set per key whose members are one random
// token per loop, scored with the time their lease ends. A replica renews
// the leases of its loops every third of a lease and removes a loop's
// token when it ends; a script that starts a loop first drops the tokens
// whose lease has ended. So a replica that dies without releasing frees
// its keys' slots within one lease. Renewals only extend tokens still
// present: a token that expired (Redis unreachable for longer than a
// lease, or restarted without its data) is not brought back, and its loop
// stops counting rather than counting forever.
type RedisLimits struct {
	observe func(op string, d time.Duration, err error)
	c       goredis.UniversalClient
	rate    *redis_rate.Limiter
	prefix  string
	lease   time.Duration
	limit   time.Duration
	log     *slog.Logger

	mu   sync.Mutex
	held map[string]map[string]struct{} // key name → tokens of loops running here

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewRedisLimits returns limits kept in Redis through c, and starts
// renewing the leases of the loops it counts until Close.
func NewRedisLimits(c goredis.UniversalClient, o RedisOptions) *RedisLimits {
	if o.Prefix == "" {
		o.Prefix = DefaultLimitPrefix
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLoopLease
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultLimitTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observe == nil {
		o.Observe = func(string, time.Duration, error) {}
	}
	r := &RedisLimits{c: c, rate: redis_rate.NewLimiter(c), observe: o.Observe, prefix: o.Prefix, lease: o.Lease, limit: o.Timeout, log: o.Logger,
		held: map[string]map[string]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	go r.renew()
	return r
}

// Close stops renewing leases. It releases nothing: loops still counted
// stop counting one lease later, as a dead replica's do. Drain the loops
// first to free their slots at once. Safe to call more than once.
func (r *RedisLimits) Close() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// rateKey is the name of a key's rate for redis_rate, which starts it with
// its own "rate:".
func (r *RedisLimits) rateKey(name string) string  { return r.prefix + "limit:rate:" + name }
func (r *RedisLimits) loopsKey(name string) string { return r.prefix + "limit:loops:" + name }

// run runs script as the Redis operation op (for Observe), bounded by the
// limits' timeout. The answer is read before it returns.
func (r *RedisLimits) run(ctx context.Context, op string, script *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	ctx, cancel := context.WithTimeout(ctx, r.limit)
	defer cancel()
	start := time.Now()
	cmd := script.Run(ctx, r.c, keys, args...)
	r.observe(op, time.Since(start), cmd.Err())
	return cmd
}

// Allow takes one request from the key's rate of perMinute requests a
// minute with the given burst, shared by every replica.
func (r *RedisLimits) Allow(ctx context.Context, key string, perMinute, burst int) (bool, time.Duration, error) {
	if perMinute <= 0 {
		return true, 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.limit)
	defer cancel()
	start := time.Now()
	res, err := r.rate.Allow(ctx, r.rateKey(key), redis_rate.Limit{Rate: perMinute, Burst: max(burst, 1), Period: time.Minute})
	r.observe("limit_rate", time.Since(start), err)
	if err != nil {
		return false, 0, fmt.Errorf("rate limit in Redis: %w", err)
	}
	if res.Allowed == 0 {
		return false, res.RetryAfter, nil
	}
	return true, 0, nil
}

// startScript counts a loop in KEYS[1] unless ARGV[1] are running: it
// drops the tokens whose lease ended, then adds ARGV[3] with a lease of
// ARGV[2] ms on Redis's clock. It returns 1 when the loop is counted.
var startScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// renewScript extends the leases of the tokens ARGV[2:] still in KEYS[1]
// to ARGV[1] ms from now, and the set's own expiry with them.
var renewScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = string.format('%.0f', now + tonumber(ARGV[1]))
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0
`)

// releaseScript removes the token ARGV[1] from KEYS[1].
var releaseScript = goredis.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)

// StartLoop counts a loop of key unless maxLoops are running on every
// replica together. When counted, release (safe to call more than once)
// removes it; a release that cannot reach Redis leaves the loop to stop
// counting when its lease ends.
func (r *RedisLimits) StartLoop(ctx context.Context, key string, maxLoops int) (release func(), ok bool, err error) {
	token := rand.Text()
	n, err := r.run(ctx, "limit_loop_start", startScript, []string{r.loopsKey(key)}, maxLoops, r.lease.Milliseconds(), token).Int64()
	if err != nil {
		// The script may have run: hold the token so that, if it did, the
		// loop's lease is renewed and released like any other's.
		r.hold(key, token)
		return once(func() { r.release(key, token) }), false, fmt.Errorf("loop limit in Redis: %w", err)
	}
	if n == 0 {
		return nil, false, nil
	}
	r.hold(key, token)
	return once(func() { r.release(key, token) }), true, nil
}

func (r *RedisLimits) hold(key, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[key] == nil {
		r.held[key] = map[string]struct{}{}
	}
	r.held[key][token] = struct{}{}
}

// release stops renewing the token, then removes it from Redis.
func (r *RedisLimits) release(key, token string) {
	r.mu.Lock()
	delete(r.held[key], token)
	if len(r.held[key]) == 0 {
		delete(r.held, key)
	}
	r.mu.Unlock()
	if err := r.run(context.Background(), "limit_loop_release", releaseScript, []string{r.loopsKey(key)}, token).Err(); err != nil {
		r.log.Warn("a loop's end did not reach Redis; its slot frees when its lease ends", "key", key, "lease", r.lease, "err", err)
	}
}

// renew extends the leases of the loops held here every third of a lease
// until Close.
func (r *RedisLimits) renew() {
	defer close(r.done)
	tick := time.NewTicker(r.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		r.mu.Lock()
		batch := make(map[string][]any, len(r.held))
		for key, tokens := range r.held {
			args := []any{r.lease.Milliseconds()}
			for tok := range tokens {
				args = append(args, tok)
			}
			batch[key] = args
		}
		r.mu.Unlock()
		for key, args := range batch {
			if err := r.run(context.Background(), "limit_loop_renew", renewScript, []string{r.loopsKey(key)}, args...).Err(); err != nil {
				r.log.Warn("could not renew the leases of running loops in Redis", "key", key, "loops", len(args)-1, "err", err)
			}
		}
	}
}

// The keys of a key's budgets share one hash tag, so that a script may
// touch them all on a Redis Cluster too.
func (r *RedisLimits) tokensKey(name string) string { return r.prefix + "limit:{" + name + "}:tokens" }
func (r *RedisLimits) spendKey(name string, w Window) string {
	return r.prefix + "limit:{" + name + "}:usd:" + w.Name
}

// spendGrace is how long a window's spend is kept after the window ends:
// replicas whose clocks differ a little still read and add to the same
// count.
const spendGrace = 24 * time.Hour

// spentScript reads Redis's clock (µs), the TAT of the token rate
// KEYS[1] (µs on that clock) and the spend of the windows KEYS[2] and
// KEYS[3] (billionths of a dollar); absent ones are "".
var spentScript = goredis.NewScript(`
local t = redis.call('TIME')
local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
return {t[1], t[2], v[1] or '', v[2] or '', v[3] or ''}
`)

// chargeScript pushes the TAT of KEYS[1] ARGV[1] µs further (from now at
// least), when ARGV[1] > 0, and adds ARGV[2] billionths of a dollar to
// KEYS[2] and KEYS[3], which expire at ARGV[3] and ARGV[4] (unix ms).
var chargeScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local add = tonumber(ARGV[1])
if add > 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
  if tat < now then tat = now end
  tat = tat + add
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 1)
end
if tonumber(ARGV[2]) > 0 then
  redis.call('INCRBY', KEYS[2], ARGV[2])
  redis.call('PEXPIREAT', KEYS[2], ARGV[3])
  redis.call('INCRBY', KEYS[3], ARGV[2])
  redis.call('PEXPIREAT', KEYS[3], ARGV[4])
end
return 0
`)

// Spent reads the key's token rate, on Redis's clock, and its spend in
// the day and the month, shared by every replica. It implements
// SharedBudgets.
func (r *RedisLimits) Spent(ctx context.Context, key string, day, month Window) (Spent, error) {
	v, err := r.run(ctx, "limit_budget_read", spentScript, []string{r.tokensKey(key), r.spendKey(key, day), r.spendKey(key, month)}).StringSlice()
	if err != nil {
		return Spent{}, fmt.Errorf("budgets in Redis: %w", err)
	}
	if len(v) != 5 {
		return Spent{}, fmt.Errorf("budgets in Redis: %d values, want 5", len(v))
	}
	var n [5]int64
	for i, s := range v {
		if s == "" {
			continue
		}
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return Spent{}, fmt.Errorf("budgets in Redis: %q is not a count", s)
		}
	}
	now := n[0]*1e6 + n[1]
	return Spent{TokensInUse: time.Duration(max(0, n[2]-now)) * time.Microsecond, DayNano: n[3], MonthNano: n[4]}, nil
}

// Charge adds tokens × perToken to the key's token rate and nanoUSD to
// its day and month, shared by every replica. It implements
// SharedBudgets.
func (r *RedisLimits) Charge(ctx context.Context, key string, tokens int, perToken time.Duration, nanoUSD int64, day, month Window) error {
	add := int64(tokens) * perToken.Microseconds()
	err := r.run(ctx, "limit_budget_charge", chargeScript, []string{r.tokensKey(key), r.spendKey(key, day), r.spendKey(key, month)},
		add, nanoUSD, day.End.Add(spendGrace).UnixMilli(), month.End.Add(spendGrace).UnixMilli()).Err()
	if err != nil {
		return fmt.Errorf("budgets in Redis: %w", err)
	}
	return nil
}
