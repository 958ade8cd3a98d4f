// Package bufpool keeps byte buffers for reuse on the request path. A
// buffer that grew past the pool's bound is not kept, so that one large
// body does not stay in memory.
package bufpool

import (
	"bytes"
	"sync"
)

// Pool holds buffers of at most Max bytes of capacity. Its zero value
// keeps none; it must not be copied after first use.
type Pool struct {
	Max int
	p   sync.Pool
}

// Get returns an empty buffer: one kept, or a new one.
func (p *Pool) Get() *bytes.Buffer {
	if b, ok := p.p.Get().(*bytes.Buffer); ok {
		return b
	}
	return new(bytes.Buffer)
}

// Put keeps b for reuse unless its capacity is past Max. The caller no
// longer uses b, nor any slice of its bytes.
func (p *Pool) Put(b *bytes.Buffer) {
	if b.Cap() > p.Max {
		return
	}
	b.Reset()
	p.p.Put(b)
}
