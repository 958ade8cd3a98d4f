package access

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// This file holds each key's budgets: tokens per minute, and US dollars
// per UTC day and per UTC month.
//
// A sampling call is checked before it is made (Reserve) against its
// estimate: its maxTokens, and what they would cost at the model's output
// price. Nothing is held: after the call its actual usage is charged
// (Charge). So concurrent calls may together pass a limit by what they
// used beyond the rest; the next call is then refused until the window
// frees enough.
//
// Tokens per minute are a rate, kept as GCRA keeps one: a "theoretical
// arrival time" (TAT) that each charged token pushes a minute/limit
// further; the tokens in use are (TAT − now)/(minute/limit), and drain
// continuously. A call charged more than the rest puts the key in debt: its
// next calls wait until the debt has drained. Spend is counted in UTC
// calendar windows, in billionths of a dollar (the precision of
// sampler.RoundUSD), so that sums are exact.

// Limits of LimitError, RateLimited metrics and Options.Unchecked.
const (
	LimitTokens = "tokens"
	LimitBudget = "budget"
)

// LimitError is a refusal by one of a key's limits: of a sampling call by
// its tokens per minute (Limit LimitTokens) or spend budget (LimitBudget),
// or of a loop by its concurrent loops (LimitLoops).
type LimitError struct {
	// Limit is LimitTokens, LimitBudget or LimitLoops.
	Limit string
	// RetryAfter is how long until the window frees enough for the call.
	RetryAfter time.Duration
	// Detail says which limit, and what it was used for.
	Detail string
}

func (e *LimitError) Error() string { return e.Detail }

// Limited marks the error as a refusal by the caller's own limits, which
// no retry and no other model changes: the sampling service passes it on
// untouched.
func (e *LimitError) Limited() bool { return true }

// Estimate is what a sampling call may use at most, as known before it is
// made.
type Estimate struct {
	// Tokens is the call's maxTokens.
	Tokens int
	// USD is what Tokens cost at the model's output price; 0 for an
	// unpriced model. Input tokens are not estimated.
	USD float64
}

// SharedBudgets keep each key's token rate and spend where every replica
// sees them. RedisLimits implements it. A Guard lets a call in when they
// fail (limits fail open).
type SharedBudgets interface {
	// Spent reads the key's token rate and its spend in the given windows,
	// with the store's clock.
	Spent(ctx context.Context, key string, day, month Window) (Spent, error)
	// Charge adds tokens × perToken to the key's token rate (none when
	// perToken is 0) and nanoUSD to both windows.
	Charge(ctx context.Context, key string, tokens int, perToken time.Duration, nanoUSD int64, day, month Window) error
}

// Spent is what a key used, as a store read it.
type Spent struct {
	// TokensInUse is how long until the key's token rate is wholly free
	// again (TAT − now, at least 0): tokens in use × the time per token.
	TokensInUse time.Duration
	// DayNano and MonthNano are the spend of the day and the month, in
	// billionths of a US dollar.
	DayNano, MonthNano int64
}

// Window is one UTC calendar window: a day or a month.
type Window struct {
	// Name is the window's own name, "2026-11-27" or "2026-11".
	Name string
	// Start and End bound it: [Start, End).
	Start, End time.Time
}

// dayOf and monthOf are the UTC day and month of t.
func dayOf(t time.Time) Window {
	t = t.UTC()
	s := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return Window{Name: s.Format(time.DateOnly), Start: s, End: s.AddDate(0, 0, 1)}
}

func monthOf(t time.Time) Window {
	t = t.UTC()
	s := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return Window{Name: s.Format("2006-01"), Start: s, End: s.AddDate(0, 1, 0)}
}

// nanoUSD is usd in billionths of a dollar.
func nanoUSD(usd float64) int64 { return int64(math.Round(usd * 1e9)) }

// Limits are a caller's limits; zero means none.
type Limits struct {
	RequestsPerMinute int
	ConcurrentLoops   int
	TokensPerMinute   int
	USDPerDay         float64
	USDPerMonth       float64
}

// Limits are the caller's limits; a nil caller has none.
func (c *Caller) Limits() Limits {
	if c == nil {
		return Limits{}
	}
	return Limits{RequestsPerMinute: c.rpm, ConcurrentLoops: int(c.maxLoop), TokensPerMinute: c.tpm,
		USDPerDay: float64(c.dayNano) / 1e9, USDPerMonth: float64(c.monthNano) / 1e9}
}

// budgeted reports whether the caller has a token rate or a spend limit.
func (c *Caller) budgeted() bool { return c.tpm > 0 || c.dayNano > 0 || c.monthNano > 0 }

// setBudgets sets the caller's token rate and spend limits.
func (c *Caller) setBudgets(tpm int, day, month float64) {
	c.tpm, c.dayNano, c.monthNano = tpm, nanoUSD(day), nanoUSD(month)
	if tpm > 0 {
		// Microseconds, the precision of the rate in Redis: both stores
		// count the same.
		c.perToken = (time.Minute / time.Duration(tpm)).Truncate(time.Microsecond)
	}
}

// localBudget is a caller's budget state in this process.
type localBudget struct {
	mu         sync.Mutex
	tat        time.Time // the token rate's theoretical arrival time
	day, month Window
	dayNano    int64
	monthNano  int64
}

// spent reads the state at now, moving to now's windows.
func (b *localBudget) spent(now time.Time) Spent {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(now)
	return Spent{TokensInUse: max(0, b.tat.Sub(now)), DayNano: b.dayNano, MonthNano: b.monthNano}
}

// roll moves to the windows of now, when it is past the current ones.
func (b *localBudget) roll(now time.Time) {
	if !in(now, b.day) {
		b.day, b.dayNano = dayOf(now), 0
	}
	if !in(now, b.month) {
		b.month, b.monthNano = monthOf(now), 0
	}
}

// in reports whether t falls in w.
func in(t time.Time, w Window) bool { return !t.Before(w.Start) && t.Before(w.End) }

func (b *localBudget) charge(now time.Time, inUse time.Duration, nano int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(now)
	if inUse > 0 {
		if b.tat.Before(now) {
			b.tat = now
		}
		b.tat = b.tat.Add(inUse)
	}
	b.dayNano += nano
	b.monthNano += nano
}

// spent reads the caller's state, from the shared budgets when set.
func (g *Guard) spent(ctx context.Context, c *Caller, now time.Time) (Spent, error) {
	if g.budgets != nil && c.name != "" {
		return g.budgets.Spent(ctx, c.name, dayOf(now), monthOf(now))
	}
	return c.budget.spent(now), nil
}

// Reserve checks a sampling call of the caller, which may use est, against
// its tokens per minute and its spend limits, and returns a *LimitError
// when it is refused:
//   - tokens: when the tokens in use plus est.Tokens would pass the rate
//     (est.Tokens counts at most the whole rate: a call whose maxTokens is
//     above it waits for an idle minute, it is not refused for ever);
//   - budget: when a window's spend has reached its limit, or when the
//     spend plus est.USD would pass it (est.USD counts at most the whole
//     limit: a call estimated above it is let in at an unspent window).
//
// RetryAfter is when the rate frees enough, or the start of the next UTC
// day or month. Nothing is held: Charge counts what the call used. With
// shared budgets that fail, the call is let in (and counted under
// Options.Unchecked).
func (g *Guard) Reserve(ctx context.Context, c *Caller, est Estimate) error {
	if c == nil || !c.budgeted() {
		return nil
	}
	now := g.now()
	s, err := g.spent(ctx, c, now)
	if err != nil {
		limit := LimitBudget
		if c.tpm > 0 {
			limit = LimitTokens
		}
		g.failed(ctx, limit, c, err)
		return nil
	}
	if c.tpm > 0 {
		n := min(max(est.Tokens, 0), c.tpm)
		if wait := s.TokensInUse + time.Duration(n)*c.perToken - time.Minute; wait > 0 {
			return &LimitError{Limit: LimitTokens, RetryAfter: wait, Detail: fmt.Sprintf(
				"this API key's tokens per minute (%d) would be exceeded: %d in use, and this request may use %d (its maxTokens); retry after %ds",
				c.tpm, tokensOf(s.TokensInUse, c.perToken), n, RetrySeconds(wait))}
		}
	}
	est1 := nanoUSD(max(est.USD, 0))
	var refused *LimitError
	for _, w := range []struct {
		per, this    string
		limit, spent int64
		window       func(time.Time) Window // worked out only to refuse
	}{{"day", "today", c.dayNano, s.DayNano, dayOf}, {"month", "this month", c.monthNano, s.MonthNano, monthOf}} {
		if w.limit <= 0 {
			continue
		}
		var detail string
		switch {
		case w.spent >= w.limit:
			detail = fmt.Sprintf("this API key's budget of %s a %s is spent (%s %s)", usd(w.limit), w.per, usd(w.spent), w.this)
		case w.spent+min(est1, w.limit) > w.limit:
			detail = fmt.Sprintf("this API key's budget of %s a %s would be exceeded: %s spent %s, and this request may cost %s (its maxTokens at the model's output price)",
				usd(w.limit), w.per, usd(w.spent), w.this, usd(est1))
		default:
			continue
		}
		end := w.window(now).End
		wait := end.Sub(now)
		refused = &LimitError{Limit: LimitBudget, RetryAfter: wait,
			Detail: fmt.Sprintf("%s; it renews at %s, retry after %ds", detail, end.Format(time.RFC3339), RetrySeconds(wait))}
	}
	if refused != nil {
		return refused // the month's when both are: the later renewal
	}
	return nil
}

// Reserve is Guard.Reserve of the caller's Guard; a nil caller has no
// limits.
func (c *Caller) Reserve(ctx context.Context, est Estimate) error {
	if c == nil {
		return nil
	}
	return c.g.Reserve(ctx, c, est)
}

// Charge is Guard.Charge of the caller's Guard; a nil caller counts
// nothing.
func (c *Caller) Charge(ctx context.Context, tokens int, usd float64) {
	if c != nil {
		c.g.Charge(ctx, c, tokens, usd)
	}
}

// Charge counts what a call of the caller used: tokens against its token
// rate (when it has one), usd against its day and month. Every caller's
// spend is counted, limits or not, for Status. A charge the shared budgets
// fail to count is logged, at most every LogEvery.
func (g *Guard) Charge(ctx context.Context, c *Caller, tokens int, usd float64) {
	if c == nil {
		return
	}
	// perToken is 0 without a token rate: the tokens count for nothing.
	nano, tokens := nanoUSD(max(usd, 0)), max(tokens, 0)
	if nano == 0 && (tokens == 0 || c.perToken == 0) {
		return
	}
	now := g.now()
	if g.budgets != nil && c.name != "" {
		// The call is over: its charge does not end with its request.
		ctx := context.WithoutCancel(ctx)
		if err := g.budgets.Charge(ctx, c.name, tokens, c.perToken, nano, dayOf(now), monthOf(now)); err != nil {
			g.warn(LimitBudget, c, fmt.Errorf("charge a call's usage: %w", err))
		}
		return
	}
	c.budget.charge(now, time.Duration(tokens)*c.perToken, nano)
}

// Status is what Guard.Status says of a caller.
type Status struct {
	// Name is the caller's key name; "" for the anonymous caller.
	Name   string
	Limits Limits
	// Tokens is the token rate's window; nil without tokens per minute.
	Tokens *TokenWindow
	// Day and Month are the spend of the current UTC day and month.
	Day, Month SpendWindow
}

// TokenWindow is the state of a token rate.
type TokenWindow struct {
	// Used is the tokens in use: charged and not yet drained.
	Used int
	// FreeAt is when none will be in use, absent new calls.
	FreeAt time.Time
}

// SpendWindow is the spend of one UTC calendar window.
type SpendWindow struct {
	USD        float64
	Start, End time.Time
}

// Status reads the caller's limits and what it used in each window. A nil
// Guard or caller (a service without access guard) has none and has spent
// nothing.
func (g *Guard) Status(ctx context.Context, c *Caller) (Status, error) {
	now := time.Now()
	if g != nil {
		now = g.now()
	}
	day, month := dayOf(now), monthOf(now)
	st := Status{Name: c.Name(), Limits: c.Limits(),
		Day: SpendWindow{Start: day.Start, End: day.End}, Month: SpendWindow{Start: month.Start, End: month.End}}
	if g == nil || c == nil {
		return st, nil
	}
	s, err := g.spent(ctx, c, now)
	if err != nil {
		return st, fmt.Errorf("read the budgets in Redis: %w", err)
	}
	st.Day.USD, st.Month.USD = float64(s.DayNano)/1e9, float64(s.MonthNano)/1e9
	if c.tpm > 0 {
		st.Tokens = &TokenWindow{Used: tokensOf(s.TokensInUse, c.perToken), FreeAt: now.Add(s.TokensInUse)}
	}
	return st, nil
}

// tokensOf is the tokens in use of a rate whose TAT is inUse ahead, at
// perToken each, rounded up: a token partly drained is still in use.
func tokensOf(inUse, perToken time.Duration) int {
	if perToken <= 0 || inUse <= 0 {
		return 0
	}
	return int((inUse + perToken - 1) / perToken)
}

// RetrySeconds is d in whole seconds, rounded up, as Retry-After and the
// refusals' details give a wait.
func RetrySeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// usd formats billionths of a dollar as dollars, without trailing zeros.
func usd(nano int64) string {
	return "$" + strconv.FormatFloat(float64(nano)/1e9, 'f', -1, 64)
}
