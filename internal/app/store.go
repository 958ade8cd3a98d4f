package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
	runsredis "github.com/sampled/sampled/internal/runs/redis"
)

// redisReadsPool is the pool of the client of the Redis store's blocking
// reads: each run a replica streams live holds one of its connections
// while it has subscribers. Commands have a client of their own, with the
// URL's pool_size (go-redis's default otherwise).
const redisReadsPool = 4096

// redisOptions are the client options of the configured Redis URL for
// user (the run store, the limits): each call bounded by its context, not
// go-redis's socket timeouts; a Redis that does not answer found out soon
// (one dial of at most 2 s, unless the URL says otherwise), so that a
// request answers 503 rather than wait; and maintenance notifications off
// — in its default mode (auto) go-redis writes to the shared options from
// each new connection whose server does not know them (Redis before 8), a
// data race between connections opened at once.
func redisOptions(rc config.Redis, user string) (*goredis.Options, error) {
	opt, err := goredis.ParseURL(rc.URL.Reveal())
	if err != nil {
		// Not err: its text may quote the URL, password and all.
		return nil, errors.New(user + ": the Redis URL is not one go-redis accepts (redis://[user:password@]host:port/db, rediss://…, unix://…)")
	}
	opt.ContextTimeoutEnabled = true
	if opt.DialTimeout == 0 {
		opt.DialTimeout = 2 * time.Second
	}
	if opt.DialerRetries == 0 {
		opt.DialerRetries = 1
	}
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt, nil
}

// openStore sets the store of loop runs: given if set, else the in-memory
// store, or the Redis one when a Redis URL is configured (m records its
// Redis operations), keeping at most maxBytes of runs (0: the store's
// default) and loop.Summary of each for listing. ready is what /readyz
// asks it. An unreachable Redis does not stop the start: it is logged,
// /readyz and the loop routes answer 503 until Redis answers, and sampling
// without loops goes on.
func (a *App) openStore(ctx context.Context, given runs.Store, rc config.Redis, maxBytes int64, m *metrics.Redis, log *slog.Logger) (ready func(context.Context) error, err error) {
	if given != nil || rc.URL == "" {
		a.store = given
		if a.store == nil {
			a.store = memory.New(memory.Options{MaxBytes: maxBytes, Summarize: loop.Summary})
		}
		a.release = append(a.release, a.store.Close)
		return func(context.Context) error { return nil }, nil
	}
	opt, err := redisOptions(rc, "run store")
	if err != nil {
		return nil, err
	}
	// The store retries appends itself, looking first whether the last
	// try was done: a retry of go-redis's could add an event twice.
	opt.MaxRetries = -1
	readOpt := *opt
	readOpt.PoolSize = redisReadsPool
	c, reads := goredis.NewClient(opt), goredis.NewClient(&readOpt)
	a.store = runsredis.New(c, runsredis.Options{Reads: reads, Observe: m.Observe, MaxBytes: maxBytes, Summarize: loop.Summary,
		Lease: time.Duration(rc.LeaseTTL), Abandon: loop.Abandoned})
	a.release = append(a.release, a.store.Close, c.Close, reads.Close)
	ping := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return c.Ping(ctx).Err()
	}
	ready = func(ctx context.Context) error {
		if err := ping(ctx); err != nil {
			return fmt.Errorf("run store: Redis at %s does not answer", opt.Addr)
		}
		return nil
	}
	if err := ping(ctx); err != nil {
		log.Warn("Redis does not answer; loops fail and /readyz answers 503 until it does", "addr", opt.Addr, "err", err)
	} else {
		log.Info("runs are kept in Redis", "addr", opt.Addr, "db", opt.DB)
	}
	return ready, nil
}

// openLimits returns the API keys' rates and loops counted in Redis,
// shared by every replica using it, with a client of its own, its
// operations recorded in m. Its release stops renewing loop leases and
// closes the client, after the loops were drained, so that their ends
// reach Redis.
func (a *App) openLimits(rc config.Redis, m *metrics.Redis, log *slog.Logger) (access.SharedLimits, error) {
	// Each limit check is bounded by its context (access.DefaultLimitTimeout).
	opt, err := redisOptions(rc, "limits")
	if err != nil {
		return nil, err
	}
	c := goredis.NewClient(opt)
	l := access.NewRedisLimits(c, access.RedisOptions{Logger: log, Observe: m.Observe})
	log.Info("API keys' rates and loop caps are shared through Redis; they are let in unchecked while Redis does not answer",
		"addr", opt.Addr, "timeout", access.DefaultLimitTimeout, "loopLease", access.DefaultLoopLease)
	a.release = append(a.release, func() error {
		l.Close()
		return c.Close()
	})
	return l, nil
}

// RedisLogs routes go-redis's own log lines through log, as warnings, so
// that they are lines of the service's log rather than plain text between
// them. go-redis keeps one logger for the whole process (redis.SetLogger):
// the program's entry point calls this once, not New, since a process may
// hold several Apps (tests do), each with a logger of its own.
func RedisLogs(log *slog.Logger) {
	goredis.SetLogger(redisLogger{log})
}

// redisLogger is go-redis's logger interface over slog.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis: "+strings.TrimPrefix(strings.TrimSpace(fmt.Sprintf(format, v...)), "redis: "), "source", "go-redis")
}
