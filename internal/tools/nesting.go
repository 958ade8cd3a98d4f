package tools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
