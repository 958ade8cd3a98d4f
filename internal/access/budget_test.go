package access

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// budgetGuard returns a Guard with the key "k" of the given budgets, its
// caller, and a pointer to the Guard's clock, set to now.
func budgetGuard(t *testing.T, o Options, k Key, now time.Time) (*Guard, *Caller, *time.Time) {
	t.Helper()
	k.Name, k.Digest = "k", HashKey("k")
	o.Keys = []Key{k}
	g := mustGuard(t, o)
	clock := now
	g.now = func() time.Time { return clock }
	c, err := g.Authenticate("Bearer k")
	if err != nil {
		t.Fatal(err)
	}
	return g, c, &clock
}

// limitOf returns err's *LimitError, failing the test when err is another.
func limitOf(t *testing.T, err error) *LimitError {
	t.Helper()
	if err == nil {
		return nil
	}
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("Reserve returned %v, want a *LimitError", err)
	}
	return le
}

// TestTokensPerMinute: 60 tokens a minute, one a second. A call fits
// exactly up to the rest; one token over is refused with the wait until
// it would fit; the rate drains with the clock; a charge beyond the rest
// is a debt that later calls wait out; a maxTokens above the whole rate
// waits for an idle minute instead of being refused for ever.
func TestTokensPerMinute(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	g, c, now := budgetGuard(t, Options{TokensPerMinute: 600}, Key{TokensPerMinute: 60}, start)
	ctx := t.Context()
	reserve := func(n int) *LimitError { return limitOf(t, g.Reserve(ctx, c, Estimate{Tokens: n})) }

	if le := reserve(60); le != nil {
		t.Fatalf("60 tokens of an idle 60-a-minute rate refused: %v", le)
	}
	g.Charge(ctx, c, 40, 0)
	if le := reserve(20); le != nil {
		t.Errorf("20 tokens with 40 in use of 60 (exactly at the limit) refused: %v", le)
	}
	le := reserve(21)
	if le == nil || le.Limit != LimitTokens || le.RetryAfter != time.Second {
		t.Fatalf("21 tokens with 40 in use of 60 = %+v, want refused (tokens) with a wait of 1s", le)
	}
	if !strings.Contains(le.Detail, "tokens per minute (60)") || !strings.Contains(le.Detail, "40 in use") {
		t.Errorf("detail %q does not say the limit and the tokens in use", le.Detail)
	}
	// A refusal takes nothing: after the wait it fits.
	*now = now.Add(le.RetryAfter)
	if le := reserve(21); le != nil {
		t.Errorf("21 tokens after the wait it was told refused: %v", le)
	}
	// 39 in use now; 30 s later, 9.
	*now = now.Add(30 * time.Second)
	if st, _ := g.Status(ctx, c); st.Tokens == nil || st.Tokens.Used != 9 || !st.Tokens.FreeAt.Equal(now.Add(9*time.Second)) {
		t.Errorf("tokens in use after 31 s = %+v, want 9, free in 9 s", st.Tokens)
	}

	// A call that used 200 tokens (input and output) leaves a debt: with
	// 209 in use, a call of 1 waits 209 + 1 − 60 = 150 s.
	g.Charge(ctx, c, 200, 0)
	if le := reserve(1); le == nil || le.RetryAfter != 150*time.Second {
		t.Errorf("1 token with 209 in use of 60 = %+v, want refused, wait 150s", le)
	}
	// maxTokens 1000 counts as the whole rate: it waits until all 209
	// drained, then passes.
	if le := reserve(1000); le == nil || le.RetryAfter != 209*time.Second {
		t.Errorf("1000 tokens with 209 in use = %+v, want refused, wait 209s", le)
	}
	*now = now.Add(209 * time.Second)
	if le := reserve(1000); le != nil {
		t.Errorf("maxTokens 1000 at an idle rate of 60 refused: %v", le)
	}
}

// TestBudgetPerDayAndMonth: $1 a day, $2 a month, at an output price that
// makes 1,000 tokens $0.01. A call is let in while its estimate fits the
// rest, and refused once the spend reaches the limit, or when the
// estimate would pass it, until the next UTC day (or month), which the
// wait says to the second.
func TestBudgetPerDayAndMonth(t *testing.T) {
	start := time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC) // an hour before the next day
	g, c, now := budgetGuard(t, Options{USDPerDay: 1, USDPerMonth: 2}, Key{}, start)
	ctx := t.Context()
	reserve := func(usd float64) *LimitError { return limitOf(t, g.Reserve(ctx, c, Estimate{Tokens: 1000, USD: usd})) }

	g.Charge(ctx, c, 0, 0.9)
	if le := reserve(0.1); le != nil {
		t.Errorf("$0.10 with $0.90 spent of $1 (exactly at the limit) refused: %v", le)
	}
	le := reserve(0.100000001)
	if le == nil || le.Limit != LimitBudget || le.RetryAfter != time.Hour {
		t.Fatalf("$0.100000001 with $0.90 spent of $1 = %+v, want refused (budget), wait 1h (the next UTC day)", le)
	}
	if !strings.Contains(le.Detail, "$1 a day") || !strings.Contains(le.Detail, "2026-11-28T00:00:00Z") {
		t.Errorf("detail %q does not say the limit and when it renews", le.Detail)
	}
	// Spent to the limit: even a free call is refused.
	g.Charge(ctx, c, 0, 0.1)
	if le := reserve(0); le == nil || le.Limit != LimitBudget || le.RetryAfter != time.Hour {
		t.Errorf("a free call with the day's $1 spent = %+v, want refused, wait 1h", le)
	}
	// The next day: the day's spend starts again, the month's goes on.
	*now = now.Add(time.Hour)
	if le := reserve(0.5); le != nil {
		t.Errorf("$0.50 on a new day refused: %v", le)
	}
	g.Charge(ctx, c, 0, 0.95)
	st, err := g.Status(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if st.Day.USD != 0.95 || st.Month.USD != 1.95 || !st.Day.Start.Equal(*now) || !st.Month.End.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("status = %+v, want $0.95 today (from %v) and $1.95 this month (to December)", st, *now)
	}
	// $1.95 of the month's $2: a call of $0.06 would pass it, and waits
	// for December (3 days), not for tomorrow.
	le = reserve(0.06)
	if want := 3 * 24 * time.Hour; le == nil || le.RetryAfter != want || !strings.Contains(le.Detail, "a month") {
		t.Errorf("$0.06 with $1.95 of the month's $2 spent = %+v, want refused, wait %v", le, want)
	}
	// An estimate above the whole limit is let in at an unspent window:
	// in December, a call of maxTokens worth $5.
	*now = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if le := reserve(5); le != nil {
		t.Errorf("a $5 estimate at a new month and day refused: %v", le)
	}
}

// TestBudgetUnlimited: a key without budgets, and the anonymous caller,
// are never refused, yet their spend is counted for Status; a nil caller
// has nothing.
func TestBudgetUnlimited(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	g, c, _ := budgetGuard(t, Options{}, Key{}, start)
	anon, _ := mustGuard(t, Options{USDPerDay: 1}).Authenticate("")
	for _, c := range []*Caller{c, anon, nil} {
		g.Charge(t.Context(), c, 1_000_000, 3)
		if err := g.Reserve(t.Context(), c, Estimate{Tokens: 1_000_000, USD: 100}); err != nil {
			t.Errorf("%q refused without budgets: %v", c.Name(), err)
		}
	}
	if st, _ := g.Status(t.Context(), c); st.Day.USD != 3 || st.Month.USD != 3 || st.Tokens != nil {
		t.Errorf("status of a key without budgets = %+v, want $3 spent, no token window", st)
	}
	if st, _ := g.Status(t.Context(), nil); st.Day.USD != 0 || st.Name != "" {
		t.Errorf("status of no caller = %+v, want nothing spent", st)
	}
}

// TestBudgetLimitsOverride: a key's own budgets replace the defaults, and
// negative ones are refused.
func TestBudgetLimitsOverride(t *testing.T) {
	g := mustGuard(t, Options{TokensPerMinute: 100, USDPerDay: 1, USDPerMonth: 10, Keys: []Key{
		{Name: "default", Digest: HashKey("d")},
		{Name: "own", Digest: HashKey("o"), TokensPerMinute: 5, USDPerDay: 0.5, USDPerMonth: 20},
	}})
	for bearer, want := range map[string]Limits{
		"d": {TokensPerMinute: 100, USDPerDay: 1, USDPerMonth: 10},
		"o": {TokensPerMinute: 5, USDPerDay: 0.5, USDPerMonth: 20},
	} {
		c, _ := g.Authenticate("Bearer " + bearer)
		if got := c.Limits(); got != want {
			t.Errorf("%s: limits %+v, want %+v", c.Name(), got, want)
		}
	}
	for name, o := range map[string]Options{
		"tokens":    {TokensPerMinute: -1},
		"day":       {USDPerDay: -0.01},
		"month NaN": {Keys: []Key{{Name: "a", Digest: HashKey("a"), USDPerMonth: nanValue()}}},
		"key day":   {Keys: []Key{{Name: "a", Digest: HashKey("a"), USDPerDay: -1}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted a negative budget", name)
		}
	}
}

func nanValue() float64 { zero := 0.0; return zero / zero }

// failingBudgets fail every call.
type failingBudgets struct{}

func (failingBudgets) Spent(context.Context, string, Window, Window) (Spent, error) {
	return Spent{}, errors.New("down")
}

func (failingBudgets) Charge(context.Context, string, int, time.Duration, int64, Window, Window) error {
	return errors.New("down")
}

// TestBudgetFailsOpen: shared budgets that fail let the call in, counted
// as unchecked under the key's limit.
func TestBudgetFailsOpen(t *testing.T) {
	var unchecked []string
	g := mustGuard(t, Options{Budgets: failingBudgets{}, Unchecked: func(l string) { unchecked = append(unchecked, l) }, Keys: []Key{
		{Name: "t", Digest: HashKey("t"), TokensPerMinute: 1},
		{Name: "b", Digest: HashKey("b"), USDPerDay: 0.01},
	}})
	for _, b := range []string{"t", "b"} {
		c, _ := g.Authenticate("Bearer " + b)
		g.Charge(t.Context(), c, 100, 100)
		if err := g.Reserve(t.Context(), c, Estimate{Tokens: 100, USD: 100}); err != nil {
			t.Errorf("%s refused with the budgets down: %v", b, err)
		}
	}
	if got := strings.Join(unchecked, ","); got != "tokens,budget" {
		t.Errorf("unchecked %q, want tokens,budget", got)
	}
}
