package tools

//lint:file-ignore SA1019 sampled is a sampling client on purpose: this file reads the sampling requests go-sdk deprecates from 2026-07-28 but keeps working through the deprecation window.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// metaRequestID is the _meta key under which a stdio session hands the
// JSON-RPC id of a sampling request to the handler (go-sdk does not show
// it to a client's handlers). The handler removes it, and trusts it only
// on stdio, where every request passes through [samplingConn].
const metaRequestID = "io.sampled/requestId"

// loopMembers are the client-run loop's extension members, which go-sdk's
// params type would drop when they are members of the params.
var loopMembers = []string{"maxIterations", "allowedToolPatterns"}

// metaInvalid is the _meta key under which a transport hands the handler
// the -32602 message of sampling params go-sdk cannot decode
// ([checkParams]). A server that sets it itself gets its own text back.
const metaInvalid = "io.sampled/invalidParams"

// checkParams returns params unchanged and true when go-sdk decodes them;
// else false and a stub whose _meta holds what is wrong in sampled's words,
// for the handler to answer with -32602. go-sdk itself would answer with
// its decoder's text, which quotes the params, sampled's own _meta
// included.
func checkParams(params json.RawMessage) (json.RawMessage, bool) {
	var p *mcp.CreateMessageWithToolsParams
	if err := json.Unmarshal(params, &p); err == nil && p != nil {
		return params, true
	}
	stub, err := json.Marshal(&mcp.CreateMessageWithToolsParams{Messages: []*mcp.SamplingMessageV2{}, Meta: mcp.Meta{metaInvalid: invalidParams(params)}})
	if err != nil {
		return params, false
	}
	return stub, false
}

// invalidParams says what is wrong with params go-sdk cannot decode, in
// sampled's words: the paths and messages of sampled's own decoder, else
// the message whose content go-sdk refuses (a block type sampling does not
// take).
func invalidParams(params json.RawMessage) string {
	var inv *sampler.InvalidError
	if err := json.Unmarshal(params, new(sampler.CreateMessageParams)); errors.As(err, &inv) && len(inv.Errors) > 0 {
		parts := make([]string, len(inv.Errors))
		for i, fe := range inv.Errors {
			parts[i] = fe.Path + ": " + fe.Message
		}
		return "invalid params: " + strings.Join(parts, "; ")
	}
	var p struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(params, &p) == nil {
		for i, m := range p.Messages {
			if json.Unmarshal(m, new(mcp.SamplingMessageV2)) != nil {
				return fmt.Sprintf("invalid params: /messages/%d/content: sampling takes text, image, audio, tool_use and tool_result blocks", i)
			}
		}
	}
	return "invalid params: /: not MCP's CreateMessageRequestParams"
}

// samplingTransport wraps a stdio transport so that its sampling requests
// are checked ([checkParams]) and carry their JSON-RPC id, and the loop's
// members, under _meta. (A streamable HTTP connection cannot be wrapped:
// go-sdk tells it of session changes through an unexported method;
// [headerTransport] checks its requests.)
type samplingTransport struct{ mcp.Transport }

// Connect connects the wrapped transport.
func (t samplingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return samplingConn{c}, nil
}

// samplingConn rewrites the params of incoming sampling requests.
type samplingConn struct{ mcp.Connection }

// Read reads the next message, rewriting a sampling request's params.
func (c samplingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && isSampling(req) {
		p, ok := checkParams(req.Params)
		if ok {
			p, err = withRequestMeta(p, req.ID.Raw())
		}
		if err == nil {
			req.Params = p
		}
	}
	return msg, nil
}

// isSampling reports whether req is a sampling request.
func isSampling(req *jsonrpc.Request) bool {
	return req.Method == "sampling/createMessage" && req.IsCall()
}

// withRequestMeta sets _meta[metaRequestID] of params to id and copies the
// loop's members of params into _meta where _meta lacks them.
func withRequestMeta(params json.RawMessage, id any) (json.RawMessage, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil || p == nil {
		return nil, fmt.Errorf("params are not an object")
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, fmt.Errorf("_meta is not an object")
		}
	}
	for _, k := range loopMembers {
		if v, ok := p[k]; ok {
			if _, set := meta[k]; !set {
				meta[k] = v
			}
		}
	}
	b, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	meta[metaRequestID] = b
	if p["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(p)
}

// requestID removes the request id from meta and returns it as text; ""
// unless trusted (the session is a stdio one).
func requestID(meta mcp.Meta, trusted bool) string {
	v, ok := meta[metaRequestID]
	if !ok {
		return ""
	}
	delete(meta, metaRequestID)
	if !trusted {
		return ""
	}
	if id, ok := v.(float64); ok { // a number, as encoding/json decodes it
		return fmt.Sprint(int64(id))
	}
	return fmt.Sprint(v)
}
