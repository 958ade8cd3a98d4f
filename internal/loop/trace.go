package loop

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
	"github.com/sampled/sampled/internal/tools"
)

// Attributes of sampled's own on a loop's spans.
const (
	attrIteration  = attribute.Key("sampled.loop.iteration")
	attrStatus     = attribute.Key("sampled.loop.status")
	attrIterations = attribute.Key("sampled.loop.iterations")
)

// agentSpan starts the span of a whole run, as the GenAI conventions name
// an agent's invocation; its iterations are its children.
func agentSpan(ctx context.Context, r *run) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, "invoke_agent loop", trace.SpanKindInternal, semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName("loop"), semconv.GenAIAgentID(r.id), semconv.GenAIConversationID(r.id))
}

// endAgentSpan ends a run's span with the run's end.
func endAgentSpan(span trace.Span, snap *Snapshot) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrStatus.String(snap.Status), attrIterations.Int(snap.Iterations))
	sampler.SetUsage(span, snap.Usage)
	if snap.Status != StatusCompleted {
		telemetry.Fail(span, errors.New(snap.Error), snap.Status)
	}
}

// iterationSpan starts the span of iteration it: its model turn and its
// tool calls are its children.
func iterationSpan(ctx context.Context, it int) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, "iteration "+strconv.Itoa(it), trace.SpanKindInternal, attrIteration.Int(it))
}

// toolSpan starts the span of the model's tool call c, named as the GenAI
// conventions name a tool's execution.
func toolSpan(ctx context.Context, c sampler.ToolCall) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(c.Name),
		semconv.GenAIToolCallID(c.ID), semconv.GenAIToolTypeKey.String("function")}
	if telemetry.Content() {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(string(c.Arguments)))
	}
	return telemetry.Start(ctx, "execute_tool "+c.Name, trace.SpanKindInternal, attrs...)
}

// endToolSpan ends a tool call's span with its result: a result with
// isError is a failed span of error.type tool_error.
func endToolSpan(span trace.Span, res *tools.Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	switch {
	case err != nil:
		telemetry.Fail(span, err, "")
	case res.IsError:
		telemetry.FailTool(span)
	}
	if telemetry.Content() {
		if b, err := json.Marshal(res.Content); err == nil {
			span.SetAttributes(semconv.GenAIToolCallResultKey.String(string(b)))
		}
	}
}
