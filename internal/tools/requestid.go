package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaRequestID is the _meta key under which a stdio session hands the
// JSON-RPC id of a sampling request to the handler (go-sdk does not show
// it to a client's handlers). The handler removes it, and trusts it only
// on stdio, where every request passes through [samplingConn].
const metaRequestID = "io.sampled/requestId"

// loopMembers are the client-run loop's extension members, which go-sdk's
// params type would drop when they are members of the params.
var loopMembers = []string{"maxIterations", "allowedToolPatterns"}

// samplingTransport wraps a stdio transport so that its sampling requests
// carry their JSON-RPC id, and the loop's members, under _meta. (A
// streamable HTTP connection cannot be wrapped: go-sdk tells it of session
// changes through an unexported method.)
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
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "sampling/createMessage" && req.IsCall() {
		if p, err := withRequestMeta(req.Params, req.ID.Raw()); err == nil {
			req.Params = p
		}
		// Params that are not an object go on unchanged, for go-sdk to
		// refuse.
	}
	return msg, nil
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
