package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// The schemas of the sample tool: the domain's MCP types read and write
// content as one block or an array, which their Go types cannot say.
const (
	sampleBlock = `{"type":"object","properties":{"type":{"type":"string"}},"required":["type"]}`
	sampleInput = `{"type":"object","description":"The params of MCP's sampling/createMessage (revision 2025-11-25).","required":["messages","maxTokens"],"properties":{` +
		`"messages":{"type":"array","minItems":1,"items":{"type":"object","required":["role","content"],"properties":{"role":{"type":"string","enum":["user","assistant"]},` +
		`"content":{"anyOf":[` + sampleBlock + `,{"type":"array","items":` + sampleBlock + `}]}}}},` +
		`"maxTokens":{"type":"integer","minimum":1},"systemPrompt":{"type":"string"},"temperature":{"type":"number","minimum":0,"maximum":2},` +
		`"stopSequences":{"type":"array","items":{"type":"string"}},"modelPreferences":{"type":"object"},"metadata":{"type":"object"},` +
		`"includeContext":{"type":"string","enum":["none","thisServer","allServers"]},` +
		`"tools":{"type":"array","items":{"type":"object","required":["name","inputSchema"],"properties":{"name":{"type":"string","minLength":1},"description":{"type":"string"},"inputSchema":{"type":"object"}}}},` +
		`"toolChoice":{"type":"object","properties":{"mode":{"type":"string","enum":["auto","required","none"]}}}}}`
	sampleOutput = `{"type":"object","required":["role","content","model"],"additionalProperties":false,"properties":{` +
		`"role":{"type":"string","enum":["assistant"]},"content":{"anyOf":[` + sampleBlock + `,{"type":"array","items":` + sampleBlock + `}]},` +
		`"model":{"type":"string"},"stopReason":{"type":"string"}}}`
)

// addSample adds MCP's sampling/createMessage as a tool, for hosts that
// cannot sample themselves: the params of the request in, its result out.
func (s *Server) addSample() {
	add(s, &mcp.Tool{Name: "sample", Title: "Sample", Annotations: readOnly,
		Description: "MCP's sampling/createMessage as a tool: the request's params in, a CreateMessageResult out (tool_use blocks when tools are given).",
		InputSchema: json.RawMessage(sampleInput), OutputSchema: json.RawMessage(sampleOutput),
	}, false, func(ctx context.Context, c *call, in sampler.CreateMessageParams) (*sampler.CreateMessageResult, error) {
		p, err := in.Params()
		if err != nil {
			return nil, err
		}
		p.OnRetry = c.retry
		res, err := c.svc.Sample(ctx, p)
		if err != nil {
			return nil, err
		}
		out := sampler.CreateMessageResultOf(res)
		return &out, nil
	})
}
