package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
)

// SamplingHost answers the sampling/createMessage requests MCP servers send
// sampled. The registry declares the sampling capability (with tools) to
// every server when it is given to [Registry.Start].
type SamplingHost interface {
	// CreateMessage answers one request. An error that is a
	// *[SamplingError] is sent with its code and message; any other error
	// is sent as an internal error (-32603) with its text.
	CreateMessage(ctx context.Context, req *SamplingRequest) (*sampler.CreateMessageResult, error)
}

// SamplingRequest is one sampling request of an MCP server.
type SamplingRequest struct {
	// Server is the configured name of the server that asks.
	Server string
	// RequestID is the JSON-RPC id of the request, when the transport
	// shows it (stdio); "" otherwise (streamable HTTP, and requests of
	// "input required" results, which have none).
	RequestID string
	// Params are the request's params (MCP's CreateMessageRequestParams).
	// On stdio, maxIterations and allowedToolPatterns sent as members of
	// the params are moved under _meta, where go-sdk keeps them.
	Params *sampler.CreateMessageParams
	// Depth is how deeply the request is nested: 1 for a request made
	// outside any client-run loop, n+1 for one made by a server whose tool
	// a client-run loop of depth n called.
	Depth int
	// Progress sends notifications/progress for the request; nil when the
	// request carries no progressToken. It never fails: a notification
	// that cannot be sent is dropped.
	Progress func(ctx context.Context, progress float64, message string)
}

// JSON-RPC codes of sampling errors.
const (
	// CodeRefused is MCP's code for a sampling request the user (here: the
	// configured policy) declined.
	CodeRefused = -1
	// CodeInvalidParams is JSON-RPC's invalid params.
	CodeInvalidParams = jsonrpc.CodeInvalidParams
	// CodeInternal is JSON-RPC's internal error, used for upstream
	// failures.
	CodeInternal = jsonrpc.CodeInternalError
)

// SamplingError is a sampling request's JSON-RPC error: Code and Message
// go on the wire; Err, if set, is its cause, for the host's own use.
type SamplingError struct {
	Code    int64
	Message string
	Err     error
}

// Error returns the message.
func (e *SamplingError) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *SamplingError) Unwrap() error { return e.Err }

// depthKey carries the sampling depth of a client-run loop's tool calls.
type depthKey struct{}

// WithSamplingDepth returns ctx marked as the context of a client-run loop
// answering a sampling request of depth d: the tool calls made under it
// count as depth d, so that the sampling requests they cause count d+1.
func WithSamplingDepth(ctx context.Context, d int) context.Context {
	return context.WithValue(ctx, depthKey{}, d)
}

// SamplingDepth returns the depth WithSamplingDepth set, 0 if none.
func SamplingDepth(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// enterDepth records a call of depth d in flight to s, and returns the
// function that ends it. r.mu guards s.depths.
func (r *Registry) enterDepth(s *server, d int) func() {
	if d <= 0 {
		return func() {}
	}
	r.mu.Lock()
	s.depths[d]++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if s.depths[d]--; s.depths[d] == 0 {
			delete(s.depths, d)
		}
		r.mu.Unlock()
	}
}

// callDepth is the deepest depth of the calls in flight to s. A request s
// pushes (protocol 2025-11-25) is not tied to the call that caused it, so
// it is counted as caused by the deepest one: a conservative bound.
func (r *Registry) callDepth(s *server) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := 0
	for k := range s.depths {
		d = max(d, k)
	}
	return d
}

// createMessageHandler returns the sampling handler of server s's client.
// Params its transport found undecodable ([checkParams]) are answered
// -32602 at once.
// The context of a request that go-sdk fulfils for an "input required"
// result (protocol 2026-07-28) is the tool call's, which carries its
// depth; a pushed request's is the session's, so the calls in flight
// bound it.
//
//lint:ignore SA1019 sampled is a sampling client on purpose; go-sdk deprecates sampling from 2026-07-28 but keeps it working through the deprecation window
func (r *Registry) createMessageHandler(s *server, h SamplingHost) func(context.Context, *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	//lint:ignore SA1019 see above
	return func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
		if msg, ok := req.Params.Meta[metaInvalid].(string); ok {
			return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: msg}
		}
		id := requestID(req.Params.Meta, s.transport == TransportStdio)
		params, err := sampler.FromMCPParams(req.Params)
		if err != nil {
			return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: fmt.Sprintf("sampling/createMessage: params: %v", err)}
		}
		sr := &SamplingRequest{Server: s.name, RequestID: id, Params: params, Depth: max(SamplingDepth(ctx), r.callDepth(s)) + 1}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			session := req.Session
			sr.Progress = func(ctx context.Context, progress float64, message string) {
				err := session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: progress, Message: message})
				if err != nil {
					r.logger.Debug("progress notification not sent", "mcpServer", s.name, "error", err)
				}
			}
		}
		ctx, span := samplingSpan(telemetry.ExtractMeta(r.nestedSink(ctx, s), req.Params.Meta), s.name)
		res, err := h.CreateMessage(ctx, sr)
		telemetry.Fail(span, err, "")
		span.End()
		if err != nil {
			return nil, wireError(err)
		}
		out, err := sampler.ToMCPResult(res)
		if err != nil {
			return nil, &jsonrpc.Error{Code: CodeInternal, Message: fmt.Sprintf("sampling/createMessage: convert the result: %v", err)}
		}
		return out, nil
	}
}

// wireError converts a host's error to the JSON-RPC error go-sdk sends
// (a plain error would go out with code 0).
func wireError(err error) *jsonrpc.Error {
	var se *SamplingError
	if errors.As(err, &se) {
		return &jsonrpc.Error{Code: se.Code, Message: se.Message}
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we
	}
	return &jsonrpc.Error{Code: CodeInternal, Message: err.Error()}
}
