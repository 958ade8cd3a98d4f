package tools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// Nesting: sampled as an MCP server of itself (or of another sampled) runs
// loops whose tools start loops. A tools/call says in its _meta how deeply
// it is nested, and for whom, so that the server bounds the depth and
// counts the loops it starts against the key of the outermost one.
const (
	// MetaDepth is the _meta member of a tools/call that says its depth:
	// 1 for a call of a loop nothing else started, n+1 for a call of a
	// loop at depth n.
	MetaDepth = "io.sampled/depth"
	// MetaCaller is the _meta member of a tools/call that carries the
	// token standing for the key of the loop that made it
	// (access.Guard.Vouch).
	MetaCaller = "io.sampled/caller"
	// MaxDepth bounds nesting: a loop that agent_delegate starts through
	// /mcp, and a sampling request of an MCP server, are refused deeper.
	MaxDepth = 3
)

// callerKey carries the token MetaCaller sends.
type callerKey struct{}

// WithCallerToken returns ctx marked as the context of a loop whose tool
// calls carry token as MetaCaller.
func WithCallerToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, callerKey{}, token)
}

// callMeta is the _meta of a tools/call made under ctx.
func callMeta(ctx context.Context) mcp.Meta {
	m := mcp.Meta{MetaDepth: SamplingDepth(ctx) + 1}
	if token, _ := ctx.Value(callerKey{}).(string); token != "" {
		m[MetaCaller] = token
	}
	return m
}

// usageKey carries where the usage of nested sampling goes.
type usageKey struct{}

// Nested is one nested sampling: a sampling request that a called MCP
// server sent sampled's host during a tool call, answered by a model call
// or, when the server asked for a client-run loop, by the run Run.
type Nested struct {
	Model string
	Run   string
	Usage sampler.Usage
}

// WithNestedUsage returns ctx whose tool calls tell add of their nested
// sampling (see Registry.nestedSink for how a request is tied to a call).
// add may be called from several goroutines at once.
func WithNestedUsage(ctx context.Context, add func(Nested)) context.Context {
	return context.WithValue(ctx, usageKey{}, add)
}

// ChargeNested tells the tool call whose server's sampling request ctx is
// the context of about n, when that call is known; otherwise it does
// nothing.
func ChargeNested(ctx context.Context, n Nested) {
	if add := nestedAdd(ctx); add != nil {
		add(n)
	}
}

// nestedAdd is where ctx's nested sampling is told; nil when nowhere.
func nestedAdd(ctx context.Context) func(Nested) {
	add, _ := ctx.Value(usageKey{}).(func(Nested))
	return add
}

// sink is a tool call in flight whose nested sampling is told.
type sink struct{ add func(Nested) }

// enterSink records, for the length of a call to s under ctx, where its
// nested sampling is told.
func (r *Registry) enterSink(ctx context.Context, s *server) func() {
	add := nestedAdd(ctx)
	if add == nil {
		return func() {}
	}
	k := &sink{add}
	r.mu.Lock()
	s.sinks[k] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(s.sinks, k)
		r.mu.Unlock()
	}
}

// nestedSink returns ctx, the context of a sampling request of server s,
// with the tool call that caused it to tell. The context of a request
// fulfilled for an "input required" result (protocol 2026-07-28) is the
// call's own, which says; a pushed request (2025-11-25) is tied to no
// call, so it is told to the one call in flight to s, and to none when
// several are (which of them caused it cannot be told).
func (r *Registry) nestedSink(ctx context.Context, s *server) context.Context {
	if nestedAdd(ctx) != nil {
		return ctx
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(s.sinks) != 1 {
		return ctx
	}
	for k := range s.sinks {
		ctx = context.WithValue(ctx, usageKey{}, k.add)
	}
	return ctx
}
