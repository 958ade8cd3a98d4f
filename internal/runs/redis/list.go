package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/runs"
)

// defaultListLimit is the page size of list when none is given.
const defaultListLimit = runs.DefaultListLimit

// errCursor: list was given a cursor it did not make.
var errCursor = runs.ErrCursor

// listed is one run of a page of list: its id and latest summary.
type listed struct {
	id      string
	summary json.RawMessage
}

// forgetScript removes a run from the index if its keys are gone (Redis
// expired them), unless it was created again meanwhile. KEYS meta, index;
// ARGV run id.
var forgetScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[1]) end
return 1
`)

// list returns a page of the kept runs whose summaries match accepts (nil:
// all), newest first, with their summaries, at most limit (0 or less: 20) of them, after the cursor of
// the previous page ("" for the first), and the cursor of the next page,
// "" when no matching run is left. A cursor is the creation number of the
// last run of its page, so it stays valid while runs are created and
// expire. Runs whose keys Redis expired are dropped from the index on the
// way.
func (s *Store) list(ctx context.Context, after string, limit int, match func(json.RawMessage) bool) ([]listed, string, error) {
	top := "+inf"
	if after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil || n == 0 {
			return nil, "", fmt.Errorf("runs: list after %q: %w", after, errCursor)
		}
		top = "(" + after
	}
	if limit <= 0 {
		limit = defaultListLimit
	}
	batch := int64(max(limit+1, 64))
	page := []listed{}
	var last int64 // creation number of the page's last run
	for {
		var entries []goredis.Z
		err := s.timed("list", func() error {
			var err error
			entries, err = s.c.ZRevRangeByScoreWithScores(ctx, s.indexKey(), &goredis.ZRangeBy{Max: top, Min: "-inf", Count: batch}).Result()
			return err
		})
		if err != nil {
			return nil, "", fmt.Errorf("runs: list: %w", err)
		}
		if len(entries) == 0 {
			return page, "", nil
		}
		metas := make([]*goredis.SliceCmd, len(entries))
		err = s.timed("list", func() error {
			_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, e := range entries {
					metas[i] = p.HMGet(ctx, s.metaKey(e.Member.(string)), "last", "exp", "cancel", "sum")
				}
				return nil
			})
			return err
		})
		if err != nil {
			return nil, "", fmt.Errorf("runs: list: %w", err)
		}
		for i, e := range entries {
			id := e.Member.(string)
			v := metas[i].Val()
			if v[0] == nil { // expired by Redis
				if err := forgetScript.Run(ctx, s.c, []string{s.metaKey(id), s.indexKey()}, id).Err(); err != nil {
					return nil, "", fmt.Errorf("runs: list: %w", err)
				}
				continue
			}
			m, err := s.parseMeta(v)
			if errors.Is(err, runs.ErrNotFound) {
				continue // expired by the store's clock
			}
			if err != nil {
				return nil, "", fmt.Errorf("runs: list: run %q: %w", id, err)
			}
			if match != nil && !match(m.value) {
				continue
			}
			if len(page) == limit {
				return page, strconv.FormatInt(last, 10), nil
			}
			page = append(page, listed{id: id, summary: m.value})
			last = int64(e.Score)
		}
		if int64(len(entries)) < batch {
			return page, "", nil
		}
		top = "(" + strconv.FormatInt(int64(entries[len(entries)-1].Score), 10)
	}
}

// List returns a page of the kept runs, newest first (runs.Store).
func (s *Store) List(ctx context.Context, q runs.ListQuery) (runs.Page, error) {
	found, next, err := s.list(ctx, q.After, q.Limit, q.Match)
	if err != nil {
		return runs.Page{}, err
	}
	page := runs.Page{Runs: make([]runs.Listed, len(found)), Next: next}
	for i, l := range found {
		page.Runs[i] = runs.Listed{ID: l.id, Summary: l.summary}
	}
	return page, nil
}
