package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/testing/storetest"
)

// TestList: runs page newest first with a cursor that survives new runs,
// filtered by their latest snapshot, without the expired ones, whether
// expired by the store's clock or by Redis.
func TestList(t *testing.T) {
	ctx := context.Background()
	const ttl = time.Minute
	snap := func(i int, status string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"n":%d,"status":%q}`, i, status))
	}
	// setup makes r1..r5 in that order; r2 and r4 finish.
	setup := func(t *testing.T) (*Store, *storetest.Clock) {
		c := storetest.NewClock()
		s := replicas(t, 1, Options{TTL: ttl, Now: c.Now})[0]
		for i := 1; i <= 5; i++ {
			id := fmt.Sprintf("r%d", i)
			if err := s.Create(ctx, id, snap(i, "running")); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				if _, err := s.Finish(ctx, id, "loop.completed", nil, snap(i, "completed")); err != nil {
					t.Fatal(err)
				}
			}
		}
		return s, c
	}
	pages := func(t *testing.T, s *Store, limit int, match func(json.RawMessage) bool) [][]string {
		t.Helper()
		var out [][]string
		after := ""
		for range 10 {
			page, next, err := s.list(ctx, after, limit, match)
			if err != nil {
				t.Fatalf("list after %q: %v", after, err)
			}
			ids := []string{}
			for _, r := range page {
				ids = append(ids, r.id)
			}
			out = append(out, ids)
			if next == "" {
				return out
			}
			after = next
		}
		t.Fatalf("list never ends: %v", out)
		return nil
	}
	completed := func(b json.RawMessage) bool { return strings.Contains(string(b), `"completed"`) }
	none := func(json.RawMessage) bool { return false }

	tests := []struct {
		name  string
		limit int
		match func(json.RawMessage) bool
		do    func(t *testing.T, s *Store, c *storetest.Clock)
		want  [][]string
	}{
		{name: "pages of 2", limit: 2, want: [][]string{{"r5", "r4"}, {"r3", "r2"}, {"r1"}}},
		{name: "default limit", want: [][]string{{"r5", "r4", "r3", "r2", "r1"}}},
		{name: "match", limit: 1, match: completed, want: [][]string{{"r4"}, {"r2"}}},
		{name: "nothing matches", limit: 1, match: none, want: [][]string{{}}},
		{
			name: "expired by the store's clock",
			do:   func(t *testing.T, s *Store, c *storetest.Clock) { c.Advance(ttl) },
			want: [][]string{{"r5", "r3", "r1"}},
		},
		{
			name: "expired by Redis",
			do: func(t *testing.T, s *Store, c *storetest.Clock) {
				if err := s.c.Del(ctx, s.metaKey("r4"), s.eventsKey("r4")).Err(); err != nil {
					t.Fatal(err)
				}
			},
			want: [][]string{{"r5", "r3", "r2", "r1"}},
		},
		{
			name: "created again: newest",
			do: func(t *testing.T, s *Store, c *storetest.Clock) {
				c.Advance(ttl)
				if err := s.Create(ctx, "r2", nil); err != nil {
					t.Fatal(err)
				}
			},
			want: [][]string{{"r2", "r5", "r3", "r1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := setup(t)
			if tt.do != nil {
				tt.do(t, s, c)
			}
			if diff := cmp.Diff(tt.want, pages(t, s, tt.limit, tt.match)); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
			// The index keeps exactly the runs whose keys exist.
			n, err := s.c.ZCard(ctx, s.indexKey()).Result()
			if want := int64(countKept(t, s)); err != nil || n != want {
				t.Errorf("index holds %d runs, %v; want %d", n, err, want)
			}
		})
	}

	t.Run("latest snapshots", func(t *testing.T) {
		s, _ := setup(t)
		if err := s.SetSnapshot(ctx, "r3", snap(3, "updated")); err != nil {
			t.Fatal(err)
		}
		page, _, err := s.list(ctx, "", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range page {
			got[r.id] = string(r.summary)
		}
		want := map[string]string{}
		for i, st := range []string{"running", "completed", "updated", "completed", "running"} {
			want[fmt.Sprintf("r%d", i+1)] = string(snap(i+1, st))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("snapshots (-want +got):\n%s", diff)
		}
	})
	t.Run("cursor survives new runs", func(t *testing.T) {
		s, _ := setup(t)
		_, next, err := s.list(ctx, "", 2, nil)
		if err != nil || next == "" {
			t.Fatalf("first page: next %q, %v", next, err)
		}
		if err := s.Create(ctx, "r6", nil); err != nil {
			t.Fatal(err)
		}
		page, _, err := s.list(ctx, next, 2, nil)
		if err != nil || len(page) != 2 || page[0].id != "r3" || page[1].id != "r2" {
			t.Errorf("second page after a new run: %+v, %v; want r3, r2", page, err)
		}
	})
	t.Run("foreign cursor", func(t *testing.T) {
		s, _ := setup(t)
		for _, cur := range []string{"not a cursor", "-1", "0"} {
			if _, _, err := s.list(ctx, cur, 0, nil); !errors.Is(err, errCursor) {
				t.Errorf("list after %q: %v, want errCursor", cur, err)
			}
		}
	})
	t.Run("many runs, few matching", func(t *testing.T) {
		// More runs than one read of the index holds.
		s := replicas(t, 1, Options{})[0]
		var want []string
		for i := 1; i <= 150; i++ {
			id := fmt.Sprintf("m%d", i)
			status := "running"
			if i%50 == 0 {
				status = "completed"
				want = append([]string{id}, want...)
			}
			if err := s.Create(ctx, id, snap(i, status)); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, p := range pages(t, s, 2, completed) {
			got = append(got, p...)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
	})
}

// countKept counts the runs whose hash exists in s's Redis.
func countKept(t *testing.T, s *Store) int {
	t.Helper()
	keys, err := s.c.Keys(context.Background(), s.prefix+"run:{*}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}
