package access

import (
	"testing"
	"time"

	"github.com/sampled/sampled/internal/testing/redistest"
)

// TestSharedBudgets: two replicas on one Redis share a key's tokens per
// minute and its spend, at the edges: 6 tokens a minute (one per 10 s),
// 4 charged on A leave exactly 2 for B, and a 3rd is refused with a wait
// under 10 s; $0.006 spent on A and $0.004 on B spend the day's $0.01, so
// B refuses even a free call until the next UTC day, which A's status
// shows as a new window with the month's spend carried on.
func TestSharedBudgets(t *testing.T) {
	rs := replicas(t, 2, RedisOptions{}, Options{Keys: []Key{{Name: "k", Digest: HashKey("k"), TokensPerMinute: 6, USDPerDay: 0.01}}})
	// The replicas' clock, which names the windows: a minute before the
	// end of today (Redis's keys expire a day after their window: the
	// windows must be today's).
	now := time.Now().UTC().Truncate(24 * time.Hour).Add(24*time.Hour - time.Minute)
	for _, r := range rs {
		r.g.now = func() time.Time { return now }
	}
	a, b := rs[0].g, rs[1].g
	cs := callers(t, []*Guard{a, b}, "k")
	ctx := t.Context()

	if err := a.Reserve(ctx, cs[0], Estimate{Tokens: 6}); err != nil {
		t.Fatalf("6 tokens of an idle rate of 6 refused: %v", err)
	}
	a.Charge(ctx, cs[0], 4, 0.006)
	if err := b.Reserve(ctx, cs[1], Estimate{Tokens: 2}); err != nil {
		t.Errorf("2 tokens on B with 4 of 6 charged on A refused: %v", err)
	}
	le := limitOf(t, b.Reserve(ctx, cs[1], Estimate{Tokens: 3}))
	if le == nil || le.Limit != LimitTokens || le.RetryAfter <= 9*time.Second || le.RetryAfter > 10*time.Second {
		t.Errorf("3 tokens on B with 4 of 6 in use = %+v, want refused (tokens), wait in (9s, 10s]", le)
	}

	b.Charge(ctx, cs[1], 0, 0.004)
	le = limitOf(t, b.Reserve(ctx, cs[1], Estimate{}))
	if le == nil || le.Limit != LimitBudget || le.RetryAfter != time.Minute {
		t.Errorf("a free call on B with the day's $0.01 spent across A and B = %+v, want refused (budget), wait 1m", le)
	}
	st, err := a.Status(ctx, cs[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Day.USD != 0.01 || st.Month.USD != 0.01 || st.Tokens == nil || st.Tokens.Used != 4 {
		t.Errorf("A's status = %+v (tokens %+v), want $0.01 today and this month, 4 tokens in use", st, st.Tokens)
	}
	// The tokens' key lives as long as its tokens are in use.
	ttl, err := redistest.Client(t, 1).PTTL(ctx, rs[0].l.tokensKey("k")).Result()
	if err != nil || ttl <= 30*time.Second || ttl > 41*time.Second {
		t.Errorf("PTTL of the tokens with 4 in use at 10 s each = %v (%v), want in (30s, 41s]", ttl, err)
	}

	now = now.Add(time.Minute) // the next UTC day
	if err := b.Reserve(ctx, cs[1], Estimate{}); err != nil {
		t.Errorf("a free call on the next day refused: %v", err)
	}
	st, _ = a.Status(ctx, cs[0])
	if wantMonth := 0.01 * float64(btoi(now.Day() != 1)); st.Day.USD != 0 || st.Month.USD != wantMonth || !st.Day.Start.Equal(now) {
		t.Errorf("A's status on the next day = %+v, want $0 today (from %v), $%v this month", st, now, wantMonth)
	}
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
