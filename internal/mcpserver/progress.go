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

// retry reports a corrective retry (sampler.Params.OnRetry).
func (p *progress) retry(attempt int, errs []sampler.FieldError) {
	why := ""
	if len(errs) > 0 {
		why = " (" + errs[0].Path + ": " + errs[0].Message + ")"
	}
	p.step(0, "attempt %d: the answer failed validation%s; asking again with the errors", attempt, why)
}
