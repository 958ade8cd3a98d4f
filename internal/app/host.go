package app

import (
	"context"
	"sync/atomic"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// lateHost is the registry's sampling host, set after the registry starts:
// the host needs the loop engine, which needs the registry. A server that
// asks before then is refused.
type lateHost struct {
	h atomic.Pointer[tools.SamplingHost]
}

func (l *lateHost) set(h tools.SamplingHost) { l.h.Store(&h) }

// CreateMessage forwards to the host once it is set.
func (l *lateHost) CreateMessage(ctx context.Context, req *tools.SamplingRequest) (*sampler.CreateMessageResult, error) {
	h := l.h.Load()
	if h == nil {
		return nil, &tools.SamplingError{Code: tools.CodeRefused, Message: "sampled is starting: ask again"}
	}
	return (*h).CreateMessage(ctx, req)
}
