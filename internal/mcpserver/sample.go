package mcpserver

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// sample is MCP's sampling/createMessage as a tool, for hosts that cannot
// sample themselves: the params of the request in, its result out.
func (s *Server) sample() tool {
	block := js{"type": "object", "properties": js{"type": js{"type": "string"}}, "required": []string{"type"}}
	content := js{"anyOf": []any{block, js{"type": "array", "items": block}}}
	input := js{"type": "object", "properties": js{
		"messages": js{"type": "array", "minItems": 1, "items": js{"type": "object", "properties": js{
			"role":    js{"type": "string", "enum": []string{"user", "assistant"}},
			"content": content,
		}, "required": []string{"role", "content"}}},
		"maxTokens":        js{"type": "integer", "minimum": 1},
		"systemPrompt":     js{"type": "string"},
		"temperature":      js{"type": "number", "minimum": 0, "maximum": 2},
		"stopSequences":    js{"type": "array", "items": js{"type": "string"}},
		"modelPreferences": js{"type": "object"},
		"metadata":         js{"type": "object"},
		"includeContext":   js{"type": "string", "enum": []string{"none", "thisServer", "allServers"}},
		"tools": js{"type": "array", "items": js{"type": "object", "properties": js{
			"name": js{"type": "string", "minLength": 1}, "description": js{"type": "string"}, "inputSchema": js{"type": "object"},
		}, "required": []string{"name", "inputSchema"}}},
		"toolChoice": js{"type": "object", "properties": js{"mode": js{"type": "string", "enum": []string{"auto", "required", "none"}}}},
	}, "required": []string{"messages", "maxTokens"},
		"description": "The params of MCP's sampling/createMessage (revision 2025-11-25)."}
	output := object(js{
		"role":       js{"type": "string", "enum": []string{"assistant"}},
		"content":    content,
		"model":      js{"type": "string"},
		"stopReason": js{"type": "string"},
	}, "role", "content", "model")
	return tool{
		def: &mcp.Tool{Name: "sample", Title: "Sample",
			Description: "MCP's sampling/createMessage as a tool: the request's params in, a CreateMessageResult out (tool_use blocks when tools are given).",
			InputSchema: raw(input), OutputSchema: raw(output), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}},
		run: func(ctx context.Context, c *call) (any, error) {
			var params sampler.CreateMessageParams
			err := json.Unmarshal(c.req.Params.Arguments, &params)
			var p *sampler.Params
			if err == nil {
				p, err = params.Params()
			}
			var inv *sampler.InvalidError
			if errors.As(err, &inv) {
				return nil, sampleError(ctx, err)
			} else if err != nil {
				return nil, &toolError{outcome: outcomeInvalidArgs, text: "invalid arguments: " + err.Error()}
			}
			svc, err := c.sampler(nil)
			if err != nil {
				return nil, err
			}
			res, err := svc.Sample(ctx, p)
			if err != nil {
				return nil, sampleError(ctx, err)
			}
			return sampler.CreateMessageResultOf(res), nil
		},
	}
}
