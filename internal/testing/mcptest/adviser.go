//lint:file-ignore SA1019 the adviser's nested sampling (deprecated in MCP 2026-07-28) is what its tests watch

package mcptest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Adviser serves an MCP server, on the official Go SDK over streamable
// HTTP on a loopback port, until the test ends, and returns its URL. Its
// one tool, consult, asks its client (sampled's host) for a sampling,
// passing on the trace context its call's _meta carried, as MCP's
// trace-context convention has a server do: the nested sampling of a
// loop's tool call.
func Adviser(t testing.TB) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "adviser", Version: "1.0.0"}, nil)
	type in struct {
		Question string `json:"question" jsonschema:"the question to consult on"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "consult", Description: "consult the adviser on a question"},
		func(ctx context.Context, req *mcp.CallToolRequest, q in) (*mcp.CallToolResult, any, error) {
			meta := mcp.Meta{}
			for _, k := range []string{"traceparent", "tracestate"} {
				if v, ok := req.Params.Meta[k]; ok {
					meta[k] = v
				}
			}
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{Meta: meta, MaxTokens: 64,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "advise on: " + q.Question}}}})
			if err != nil {
				return nil, nil, err
			}
			text := ""
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				text = tc.Text
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}
