package mcpserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// progress sends notifications/progress for a call whose request carried a
// progressToken; without one it sends nothing.
type progress struct {
	session *mcp.ServerSession
	token   any
	mu      sync.Mutex
	n       float64
	ctx     context.Context // the call's
}

// newProgress returns the progress of a call; ctx is the call's.
func newProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	return &progress{ctx: ctx, session: req.Session, token: req.Params.GetProgressToken()}
}

// step reports one more step done of total (0: unknown).
func (p *progress) step(total float64, format string, args ...any) {
	if p.token == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	p.n++
	// A client that reads nothing must not hold up the call.
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	_ = p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Total: total,
		Message: fmt.Sprintf(format, args...)})
}

// observer passes what the sampling service reports on to the service's
// observer (metrics) and reports corrective retries as progress.
type observer struct {
	base     sampler.Observer
	progress *progress
}

// UpstreamRetry implements sampler.Observer.
func (o observer) UpstreamRetry(provider, reason string) {
	if o.base != nil {
		o.base.UpstreamRetry(provider, reason)
	}
}

// AnswerInvalid implements sampler.Observer; a corrective retry is progress.
func (o observer) AnswerInvalid(method, kind string, retried bool) {
	if o.base != nil {
		o.base.AnswerInvalid(method, kind, retried)
	}
	if retried {
		o.progress.step(0, "the answer failed validation (%s); asking again with the errors", kind)
	}
}

// Exhausted implements sampler.Observer.
func (o observer) Exhausted(method string) {
	if o.base != nil {
		o.base.Exhausted(method)
	}
}

// Sampled implements sampler.Observer.
func (o observer) Sampled(caller, mode, modelID, outcome string) {
	if o.base != nil {
		o.base.Sampled(caller, mode, modelID, outcome)
	}
}

// Overhead implements sampler.Observer.
func (o observer) Overhead(d time.Duration) {
	if o.base != nil {
		o.base.Overhead(d)
	}
}
