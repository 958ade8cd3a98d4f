package handlers

import (
	"net/http"
	"time"

	"github.com/sampled/sampled/internal/metrics"
)

// keyBody is the answer of GET /v1/keys/self: the caller's limits and what
// it used of them. A limit that is not set is null.
type keyBody struct {
	// Name is the key's configured name; "anonymous" for the callers of a
	// service without keys.
	Name   string    `json:"name"`
	Limits keyLimits `json:"limits"`
	Usage  keyUsage  `json:"usage"`
}

type keyLimits struct {
	RequestsPerMinute *int     `json:"requestsPerMinute"`
	ConcurrentLoops   *int     `json:"concurrentLoops"`
	TokensPerMinute   *int     `json:"tokensPerMinute"`
	USDPerDay         *float64 `json:"usdPerDay"`
	USDPerMonth       *float64 `json:"usdPerMonth"`
}

// keyUsage holds one member per window.
type keyUsage struct {
	// Tokens is the rate of tokens per minute; null without one.
	Tokens *tokenWindow `json:"tokensPerMinute"`
	Day    spendWindow  `json:"day"`
	Month  spendWindow  `json:"month"`
}

// tokenWindow is a rolling minute: tokens drain continuously.
type tokenWindow struct {
	Used  int `json:"used"`
	Limit int `json:"limit"`
	// ResetsAt is when no token will be in use, absent new calls.
	ResetsAt time.Time `json:"resetsAt"`
}

// spendWindow is a UTC day or month.
type spendWindow struct {
	USD      float64   `json:"usd"`
	Limit    *float64  `json:"limit"`
	Start    time.Time `json:"start"`
	ResetsAt time.Time `json:"resetsAt"`
}

// orNull is a pointer to v, nil for zero: a limit of 0 is no limit.
func orNull[T int | float64](v T) *T {
	if v == 0 {
		return nil
	}
	return &v
}

// handleKeySelf answers GET /v1/keys/self: the calling key's name and
// limits, its tokens in use of its rate, and what it spent this UTC day
// and month (with Redis, on all replicas together). The key itself is
// never in it.
func (s *server) handleKeySelf(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	st, err := s.guard.Status(r.Context(), c)
	if err != nil {
		p := Problem{Type: problemBase + "limits-unavailable", Title: "Limits unavailable", Status: http.StatusServiceUnavailable,
			Detail: "the shared limits (Redis) did not answer; try again shortly", retryAfter: time.Second}
		s.logFailure(r, err, p)
		s.writeProblem(w, r, p)
		return
	}
	l := st.Limits
	out := keyBody{Name: metrics.KeyLabel(st.Name),
		Limits: keyLimits{RequestsPerMinute: orNull(l.RequestsPerMinute), ConcurrentLoops: orNull(l.ConcurrentLoops),
			TokensPerMinute: orNull(l.TokensPerMinute), USDPerDay: orNull(l.USDPerDay), USDPerMonth: orNull(l.USDPerMonth)},
		Usage: keyUsage{
			Day:   spendWindow{USD: st.Day.USD, Limit: orNull(l.USDPerDay), Start: st.Day.Start, ResetsAt: st.Day.End},
			Month: spendWindow{USD: st.Month.USD, Limit: orNull(l.USDPerMonth), Start: st.Month.Start, ResetsAt: st.Month.End},
		}}
	if st.Tokens != nil {
		out.Usage.Tokens = &tokenWindow{Used: st.Tokens.Used, Limit: l.TokensPerMinute, ResetsAt: st.Tokens.FreeAt.UTC().Truncate(time.Millisecond)}
	}
	s.writeJSON(w, http.StatusOK, out)
}
