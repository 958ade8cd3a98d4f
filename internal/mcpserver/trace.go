package mcpserver

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sampled/sampled/internal/telemetry"
)

// attrSampler says who sampled for a tool call: the client or the service.
const attrSampler = attribute.Key("sampled.mcp.sampler")

// toolCallSpan starts the server span of a tools/call to sampled's /mcp,
// named as the MCP conventions name it, a child of the trace context its
// _meta carried (or of the HTTP request's).
func toolCallSpan(ctx context.Context, tool string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, "tools/call "+tool, trace.SpanKindServer, semconv.McpMethodNameKey.String("tools/call"),
		semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool))
}

// endToolCallSpan ends a tool call's span with its outcome.
func endToolCallSpan(span trace.Span, c *call) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrSampler.String(c.by))
	if c.outcome != outcomeOK {
		telemetry.Fail(span, errors.New("the tool call ended "+c.outcome), c.outcome)
	}
}
