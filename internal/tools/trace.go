package tools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sampled/sampled/internal/telemetry"
)

// attrServer names the configured MCP server of a span.
const attrServer = attribute.Key("sampled.mcp.server")

// callSpan starts the client span of a tools/call to server, named as the
// MCP conventions name it; the call's _meta carries its trace context.
func callSpan(ctx context.Context, server, tool string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, "tools/call "+tool, trace.SpanKindClient, semconv.McpMethodNameKey.String("tools/call"),
		semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool), attrServer.String(server))
}

// endCallSpan ends a tools/call's span: failed by a protocol error, or
// with error.type tool_error when the tool answered isError.
func endCallSpan(span trace.Span, res *mcp.CallToolResult, err error) {
	defer span.End()
	switch {
	case err != nil:
		telemetry.Fail(span, err, "")
	case res != nil && res.IsError:
		telemetry.FailTool(span)
	}
}

// samplingSpan starts the server span of a sampling/createMessage request
// from server, a child of the trace context its _meta carried.
func samplingSpan(ctx context.Context, server string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, "sampling/createMessage", trace.SpanKindServer,
		semconv.McpMethodNameKey.String("sampling/createMessage"), attrServer.String(server))
}
