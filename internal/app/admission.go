package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/mcpserver"
	"github.com/sampled/sampled/internal/metrics"
)

// loopAdmission admits the loops that /mcp's agent_delegate starts as
// POST /v1/loops admits its own: each belongs to the API key of the
// tools/call request and counts against that key's concurrent loops until
// it ends; a refusal is counted under sampled_rate_limited_total.
type loopAdmission struct {
	guard   *access.Guard
	metrics *metrics.Metrics
}

// AdmitLoop implements mcpserver.Admission. The go-sdk runs a tool in the
// context of the session (made from its initialize request), not of the
// HTTP request that carried the call, but hands it that request's header:
// the key the handlers authenticated is found again from it.
func (a loopAdmission) AdmitLoop(ctx context.Context, header http.Header) (string, func(), error) {
	c, err := a.guard.Authenticate(header.Get("Authorization"))
	if err != nil {
		return "", nil, fmt.Errorf("admit a loop: %w", err)
	}
	release, ok, wait := a.guard.StartLoop(ctx, c)
	if !ok {
		a.metrics.RateLimited.WithLabelValues(metrics.KeyLabel(c.Name()), metrics.LimitLoops).Inc()
		return "", nil, &mcpserver.LoopLimitError{RetryAfter: wait}
	}
	return c.Name(), release, nil
}
