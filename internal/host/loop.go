package host

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// MetaLoop is the key of the result's _meta under which a client-run loop
// names its run: {"id": "loop_…", "traceId": "…", "iterations": n,
// "origin": {"server": "…", "requestId": "…"}}.
const MetaLoop = "io.sampled/loop"

// extension is what a request asks of a client-run loop; maxIterations 0
// asks for none.
type extension struct {
	maxIterations int
	patterns      tools.Patterns
}

// loopMembers are the extension members under _meta.
type loopMembers struct {
	MaxIterations       json.RawMessage `json:"maxIterations"`
	AllowedToolPatterns json.RawMessage `json:"allowedToolPatterns"`
}

// extensions reads maxIterations and allowedToolPatterns from _meta, where
// go-sdk keeps them (it drops the params' members MCP's schema does not
// name; on stdio the registry moves them under _meta). They come together;
// an error is -32602 naming the path.
func extensions(meta json.RawMessage) (extension, error) {
	var m loopMembers
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &m); err != nil {
			return extension{}, invalid("invalid params: /_meta: must be an object")
		}
	}
	const at = "/_meta"
	if m.MaxIterations == nil && m.AllowedToolPatterns == nil {
		return extension{}, nil
	}
	if m.MaxIterations == nil {
		return extension{}, invalid("invalid params: %s/maxIterations: required with allowedToolPatterns (a client-run loop)", at)
	}
	if m.AllowedToolPatterns == nil {
		return extension{}, invalid("invalid params: %s/allowedToolPatterns: required with maxIterations (a client-run loop)", at)
	}
	var n int
	if err := json.Unmarshal(m.MaxIterations, &n); err != nil || n < 1 || n > 100 || bytes.ContainsAny(m.MaxIterations, ".eE") {
		return extension{}, invalid("invalid params: %s/maxIterations: want an integer from 1 to 100", at)
	}
	var patterns tools.Patterns
	if err := json.Unmarshal(m.AllowedToolPatterns, &patterns); err != nil || len(patterns) == 0 {
		return extension{}, invalid("invalid params: %s/allowedToolPatterns: want a non-empty array of glob patterns", at)
	}
	for i, p := range patterns {
		if !p.Valid() {
			return extension{}, invalid("invalid params: %s/allowedToolPatterns/%d: %q is not a valid glob pattern", at, i, p)
		}
	}
	return extension{maxIterations: n, patterns: patterns}, nil
}

// Origin says which MCP server request started a client-run loop.
type Origin struct {
	// Server is the configured name of the MCP server.
	Server string `json:"server"`
	// RequestID is the JSON-RPC id of its sampling request, when the
	// transport shows it (stdio).
	RequestID string `json:"requestId,omitempty"`
}

// runLoop runs a client-run loop for the request and answers with its final
// text.
func (h *Host) runLoop(ctx context.Context, req *tools.SamplingRequest, pol *policy, p *sampler.Params, ext extension) (*sampler.CreateMessageResult, error) {
	switch {
	case !pol.Loop:
		return nil, refused("MCP server %q may not ask for a client-run loop (sampling.loop.allowed in sampled's configuration)", req.Server)
	case len(p.Tools) > 0:
		return nil, invalid("invalid params: /tools: a client-run loop uses sampled's tools; give tools, or maxIterations and allowedToolPatterns, not both")
	}
	n := min(ext.maxIterations, cmp.Or(pol.LoopMaxIterations, defaultLoopIterations))
	var names []string
	for _, t := range h.o.Tools.Tools() {
		// Never the asking server's own tools: the tool that asks is one
		// of them, and a loop calling it would ask again.
		if t.Server != req.Server && ext.patterns.Match(t.Name) && pol.LoopTools.Match(t.Name) {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return nil, refused("no tool of sampled matches allowedToolPatterns %q within what MCP server %q may reach (%q)", ext.patterns, req.Server, pol.LoopTools)
	}
	spec := loop.Spec{
		Messages:      p.Messages,
		SystemPrompt:  p.SystemPrompt,
		ModelSpec:     p.ModelSpec,
		AllowedTools:  names, // exposed names hold no glob metacharacters
		MaxIterations: &n,
		MaxTokens:     &p.MaxTokens,
		Temperature:   p.Temperature,
		// The run's snapshot and loop.started say which server's request
		// started it.
		Origin: loop.Origin{Kind: loop.OriginMCP, Server: req.Server, RequestID: req.RequestID},
	}
	var onIteration func(int)
	if req.Progress != nil {
		onIteration = func(it int) {
			req.Progress(ctx, float64(it), fmt.Sprintf("client-run loop: iteration %d of at most %d", it, n))
		}
	}
	snap, err := h.o.Loops.Run(tools.WithSamplingDepth(ctx, req.Depth), spec, onIteration)
	if err != nil {
		return nil, samplingError(ctx, err)
	}
	tools.ChargeNested(ctx, tools.Nested{Model: snap.Model, Run: snap.ID, Usage: snap.Usage}) // what the run spent, however it ended
	switch snap.Status {
	case loop.StatusCompleted:
	case loop.StatusMaxIterations:
		return nil, failed("the client-run loop %s reached maxIterations (%d) without a final answer", snap.ID, n)
	case loop.StatusCancelled:
		return nil, failed("the client-run loop %s was cancelled", snap.ID)
	default:
		return nil, failed("the client-run loop %s ended %s: %s", snap.ID, snap.Status, snap.Error)
	}
	meta, err := json.Marshal(map[string]any{MetaLoop: map[string]any{"id": snap.ID, "traceId": snap.TraceID,
		"iterations": snap.Iterations, "origin": Origin{Server: req.Server, RequestID: req.RequestID}}})
	if err != nil {
		return nil, failed("encode the result: %v", err)
	}
	return &sampler.CreateMessageResult{Role: sampler.RoleAssistant, Content: []sampler.Content{sampler.TextBlock(snap.Result)},
		Model: snap.Model, StopReason: sampler.StopEndTurn, Meta: meta}, nil
}
