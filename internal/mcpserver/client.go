package mcpserver

//lint:file-ignore SA1019 MCP sampling, deprecated by the 2026-07-28 revision, is what this file is about; it works on 2025-11-25 sessions, the only ones /mcp keeps.

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// The one model of client sampling, as the sampling service names it.
const (
	clientName  = "client"
	clientModel = "model"
)

// clientProvider is a sampler.Provider that asks the MCP client of the
// session in its context (withClient) to sample, through
// sampling/createMessage: the sampling service then applies its checks,
// validation and corrective retries to the client's answers as to any
// provider's.
type clientProvider struct{}

// clientCall is what withClient puts in a context.
type clientCall struct {
	session *mcp.ServerSession
	// meta is sent as the request's _meta (agent_delegate's hints).
	meta map[string]any
}

type clientKey struct{}

// withClient returns ctx carrying the session whose client samples, and
// the _meta of its sampling requests.
func withClient(ctx context.Context, session *mcp.ServerSession, meta map[string]any) context.Context {
	return context.WithValue(ctx, clientKey{}, clientCall{session: session, meta: meta})
}

// Name implements sampler.Provider.
func (clientProvider) Name() string { return clientName }

// Sample sends one sampling/createMessage request. MCP's request has no
// place for a JSON Schema, so schema mode asks for the value in the system
// prompt and the service validates what comes back.
func (clientProvider) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	c, ok := ctx.Value(clientKey{}).(clientCall)
	if !ok {
		return nil, errors.New("mcpserver: no client session to sample with")
	}
	params, err := createMessageParams(req, c.meta)
	if err != nil {
		return nil, err
	}
	res, err := c.session.CreateMessageWithTools(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &sampler.UpstreamError{Provider: clientName, Message: "the client's sampling/createMessage failed: " + clip(err.Error(), 500), Err: err}
	}
	return responseOf(res)
}

// createMessageParams converts a domain request to MCP's params with the
// domain's bridge; a schema goes into the system prompt.
func createMessageParams(req *sampler.Request, meta map[string]any) (*mcp.CreateMessageWithToolsParams, error) {
	system := req.SystemPrompt
	if len(req.Schema) > 0 {
		if system != "" {
			system += "\n\n"
		}
		system += "Answer with only one JSON value, no other text, that validates against this JSON Schema:\n" + string(req.Schema)
	}
	p, err := sampler.ToMCPParams(&sampler.CreateMessageParams{Messages: req.Messages, SystemPrompt: system, MaxTokens: &req.MaxTokens,
		Temperature: req.Temperature, StopSequences: req.StopSequences, Tools: req.Tools, ToolChoice: req.ToolChoice})
	if err != nil {
		return nil, fmt.Errorf("convert sampling request: %w", err)
	}
	if len(meta) > 0 {
		p.Meta = meta
	}
	return p, nil
}

// responseOf converts the client's result to a provider response.
func responseOf(res *mcp.CreateMessageWithToolsResult) (*sampler.Response, error) {
	r, err := sampler.FromMCPResult(res)
	if err != nil {
		return nil, &sampler.UpstreamError{Provider: clientName, Message: "the client's result is not a CreateMessageResult: " + err.Error(), Err: err}
	}
	return &sampler.Response{Model: r.Model, Content: r.Content, StopReason: r.StopReason}, nil
}

// clientCanSample reports whether the client of ss can be asked to sample,
// and if not, why.
func clientCanSample(ss *mcp.ServerSession, needsTools bool) (bool, string) {
	p := ss.InitializeParams()
	switch {
	case p == nil || p.Capabilities == nil || p.Capabilities.Sampling == nil:
		return false, "the client did not declare the sampling capability"
	case needsTools && p.Capabilities.Sampling.Tools == nil:
		return false, "the client did not declare sampling with tools (capabilities.sampling.tools)"
	case p.ProtocolVersion >= "2026-07-28":
		// Servers on 2026-07-28 may not send sampling/createMessage as a
		// request of their own.
		return false, "protocol version " + p.ProtocolVersion + " has no server-initiated sampling requests"
	}
	return true, ""
}
