package sampler

import (
	"context"
	"sync"
)

// Later holds the work of a request that can wait until its answer has
// been sent, such as counting what it did: the request's handler puts it
// in the request's context (WithLater) and runs it once the answer is out
// (Run), so that the caller does not wait for it. Work handed to a Later
// that has run, or to AfterAnswer with no Later in the context (a loop, the
// MCP host), runs at once.
type Later struct {
	mu   sync.Mutex
	done bool
	fs   []func()
	buf  [2]func()
}

type laterKey struct{}

// maxHeld bounds what a Later holds: work given past it runs at once. A
// request's own work is a few functions (one per model call and one for
// the request); a context kept past its request, by a loop or an MCP
// session, must not make a Later grow without end.
const maxHeld = 16

// WithLater returns ctx with l, which holds what AfterAnswer is given.
func WithLater(ctx context.Context, l *Later) context.Context {
	return context.WithValue(ctx, laterKey{}, l)
}

// AfterAnswer runs f after the answer of ctx's request has been sent, or
// at once when there is no such answer to wait for.
func AfterAnswer(ctx context.Context, f func()) {
	if l, ok := ctx.Value(laterKey{}).(*Later); ok && l.hold(f) {
		return
	}
	f()
}

func (l *Later) hold(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || len(l.fs) >= maxHeld {
		return false
	}
	if l.fs == nil {
		l.fs = l.buf[:0]
	}
	l.fs = append(l.fs, f)
	return true
}

// Run runs what l holds, in the order it was given; what comes after runs
// at once.
func (l *Later) Run() {
	l.mu.Lock()
	l.done = true
	fs := l.fs
	l.fs = nil
	l.mu.Unlock()
	for _, f := range fs {
		f()
	}
}
