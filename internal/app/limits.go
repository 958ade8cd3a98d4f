package app

import (
	"log/slog"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/metrics"
)

// openLimits returns where the API keys' rates and loops are counted: in
// Redis when a Redis URL is configured, shared by every replica using it,
// with a client of its own, its operations recorded in m; nil (in this
// process) otherwise. closeShared stops
// renewing loop leases and closes the client; call it after the loops
// were drained, so that their ends reach Redis.
func openLimits(rc config.Redis, m *metrics.Redis, log *slog.Logger) (shared access.SharedLimits, closeShared func() error, err error) {
	if rc.URL == "" {
		return nil, func() error { return nil }, nil
	}
	// Each limit check is bounded by its context (access.DefaultLimitTimeout).
	opt, err := redisOptions(rc, "limits")
	if err != nil {
		return nil, nil, err
	}
	c := goredis.NewClient(opt)
	l := access.NewRedisLimits(c, access.RedisOptions{Logger: log, Observe: m.Observe})
	log.Info("API keys' rates and loop caps are shared through Redis; they are let in unchecked while Redis does not answer",
		"addr", opt.Addr, "timeout", access.DefaultLimitTimeout, "loopLease", access.DefaultLoopLease)
	return l, func() error {
		l.Close()
		return c.Close()
	}, nil
}
