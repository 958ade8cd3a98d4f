package mcpserver

//lint:file-ignore SA1019 MCP sampling, deprecated by the 2026-07-28 revision, is what this file is about; it works on 2025-11-25 sessions, the only ones /mcp keeps.

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
)

// The one model of client sampling, as the sampling service names it.
const (
	clientName  = "client"
	clientModel = "model"
)

// clientProvider is a sampler.Provider that asks the MCP client of the
// tool call in its context (callKey) to sample, through
// sampling/createMessage: the sampling service then applies its checks,
// validation and corrective retries to the client's answers as to any
// provider's.
type clientProvider struct{}

// Name implements sampler.Provider.
func (clientProvider) Name() string { return clientName }

// Sample sends one sampling/createMessage request. MCP's request has no
// place for a JSON Schema, so schema mode asks for the value in the system
// prompt and the service validates what comes back.
func (clientProvider) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok || c.req == nil {
		return nil, errors.New("mcpserver: no client session to sample with")
	}
	system := req.SystemPrompt
	if len(req.Schema) > 0 {
		if system != "" {
			system += "\n\n"
		}
		system += "Answer with only one JSON value, no other text, that validates against this JSON Schema:\n" + string(req.Schema)
	}
	params, err := sampler.ToMCPParams(&sampler.CreateMessageParams{Messages: req.Messages, SystemPrompt: system, MaxTokens: &req.MaxTokens,
		Temperature: req.Temperature, StopSequences: req.StopSequences, Tools: req.Tools, ToolChoice: req.ToolChoice})
	if err != nil {
		return nil, fmt.Errorf("convert sampling request: %w", err)
	}
	if len(c.meta) > 0 {
		params.Meta = maps.Clone(c.meta)
	}
	params.Meta = telemetry.InjectMeta(ctx, params.Meta)
	res, err := c.req.Session.CreateMessageWithTools(unrouted{ctx}, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &sampler.UpstreamError{Provider: clientName, Message: "the client's sampling/createMessage failed: " + clip(err.Error(), 500), Err: err}
	}
	r, err := sampler.FromMCPResult(res)
	if err != nil {
		return nil, &sampler.UpstreamError{Provider: clientName, Message: "the client's result is not a CreateMessageResult: " + err.Error(), Err: err}
	}
	return &sampler.Response{Model: r.Model, Content: r.Content, StopReason: r.StopReason}, nil
}

// unrouted is the context of a sampling request: ctx, whose values vanish
// once it is done. go-sdk sends a message on the event stream of the
// request that a value of its context names: the sampling request on the
// stream of the tool call's response. When ctx ends, go-sdk sends
// notifications/cancelled for the sampling request with ctx's values; but
// a client that cancelled the tool call no longer reads that stream, so
// the notification, without them, goes on the session's GET stream, which
// the client reads.
type unrouted struct{ context.Context }

// Value returns ctx's value for key while ctx is not done, nil after.
func (c unrouted) Value(key any) any {
	if c.Err() != nil {
		return nil
	}
	return c.Context.Value(key)
}

// who decides who samples for a call in session ss: its client if it can
// be asked to (with tools, if needsTools), unless Mode says otherwise.
func (s *Server) who(ss *mcp.ServerSession, needsTools bool) (string, error) {
	if s.o.Mode == ModeService {
		return byService, nil
	}
	var why string
	switch p := ss.InitializeParams(); {
	case p == nil || p.Capabilities == nil || p.Capabilities.Sampling == nil:
		why = "the client did not declare the sampling capability"
	case needsTools && p.Capabilities.Sampling.Tools == nil:
		why = "the client did not declare sampling with tools (capabilities.sampling.tools)"
	case p.ProtocolVersion >= "2026-07-28":
		// Servers on 2026-07-28 may not send sampling/createMessage as a
		// request of their own.
		why = "protocol version " + p.ProtocolVersion + " has no server-initiated sampling requests"
	default:
		return byClient, nil
	}
	if s.o.Mode == ModeClient {
		return "", &toolError{outcome: outcomeRefused, text: "this server samples through its client (mcpServer.sampling: client), but " + why}
	}
	return byService, nil
}
