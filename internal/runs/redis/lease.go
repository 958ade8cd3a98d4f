package redis

import (
	"encoding/json"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/runs"
)

// renewScript renews the lease of a run its Store owns, while the run
// runs; it answers 0, and drops the lease, once the run is gone or
// finished (by a janitor, if the lease had expired). A lease that expired
// while the run still runs is taken again: no janitor ended the run, and
// its owner is alive. KEYS meta, lease; ARGV token, lease (ms).
var renewScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'exp') == 1 then
  if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
`)

// abandonScript ends a run whose lease expired, as add does, unless it is
// no longer running or its lease is back; it marks the run 'lost' (see
// setSnapshotScript). A run that is gone or finished leaves the running
// runs. KEYS those of appendScript; ARGV addArgs of a terminal event. It returns the terminal event's id, or 0 when it ended nothing.
var abandonScript = goredis.NewScript(alive + add + `
if not alive(a.now) or redis.call('HEXISTS', KEYS[1], 'exp') == 1 then
  redis.call('SREM', KEYS[4], a.id)
  return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'lost', 1)
return add()
`)

// hold starts renewing the lease of run id.
func (s *Store) hold(id string) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.held[id] = struct{}{}
}

// unhold stops renewing the lease of run id.
func (s *Store) unhold(id string) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	delete(s.held, id)
}

// keepLeases renews the Store's leases and, with Abandon, ends the runs
// whose lease expired, every third of the lease, until Close.
func (s *Store) keepLeases() {
	defer s.wg.Done()
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.renew()
		if s.abandon != nil {
			s.sweep()
		}
	}
}

// renew renews the leases the Store holds, in one pipeline. A run that is
// gone or was ended by another Store is let go, and its Cancelled
// channels close: its loop stops.
func (s *Store) renew() {
	s.hmu.Lock()
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	s.hmu.Unlock()
	if len(ids) == 0 {
		return
	}
	cmds := make([]*goredis.Cmd, len(ids))
	err := s.timed("renew", func() error {
		_, err := s.c.Pipelined(s.ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				// Eval, not EvalSha: a pipeline cannot load the script
				// after a restart of Redis; the script is short.
				cmds[i] = renewScript.Eval(s.ctx, p, []string{s.metaKey(id), s.leaseKey(id)}, s.token, s.lease.Milliseconds())
			}
			return nil
		})
		return err
	})
	if err != nil {
		return // renewed next time, within a third of the lease
	}
	for i, id := range ids {
		if n, err := cmds[i].Int64(); err == nil && n == 0 {
			s.unhold(id)
			s.fire(id)
		}
	}
}

// sweep ends the running runs whose lease is gone (the janitor).
func (s *Store) sweep() {
	var ids []string
	err := s.timed("sweep", func() error {
		var err error
		ids, err = s.c.SMembers(s.ctx, s.runningKey()).Result()
		return err
	})
	if err != nil || len(ids) == 0 {
		return
	}
	leases := make([]*goredis.IntCmd, len(ids))
	err = s.timed("sweep", func() error {
		_, err := s.c.Pipelined(s.ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				leases[i] = p.Exists(s.ctx, s.leaseKey(id))
			}
			return nil
		})
		return err
	})
	if err != nil {
		return
	}
	for i, id := range ids {
		if leases[i].Val() == 0 {
			s.end(id)
		}
	}
}

// end ends run id, whose lease was gone, with the terminal event and
// snapshot of Abandon, unless it finished or its lease came back
// meanwhile. An error is left to the next sweep.
func (s *Store) end(id string) {
	m, err := s.readMeta(s.ctx, id)
	var snap json.RawMessage
	switch {
	case errors.Is(err, runs.ErrNotFound):
		// Gone: the script drops it from the running runs.
	case err != nil:
		return
	case m.finished:
		// Finished: the script drops it from the running runs.
	default:
		snap = m.value
	}
	name, data, final := s.abandon(id, snap, AbandonedReason)
	now := s.now()
	args := s.addArgs(id, name, data, final, true)
	args.Now, args.ExpiresAt = now.UnixMilli(), now.Add(s.ttl).UnixMilli()
	_ = s.timed("abandon", func() error {
		return abandonScript.Run(s.ctx, s.c, s.addKeys(id), args.String()).Err()
	})
}
