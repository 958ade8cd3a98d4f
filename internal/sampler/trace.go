package sampler

import (
	"context"
	"encoding/json"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/telemetry"
)

// Attributes of sampled's own on its spans, beside the conventions'.
const (
	attrGuarantee = attribute.Key("sampled.guarantee")
	attrAttempt   = attribute.Key("sampled.attempt")
	attrAttempts  = attribute.Key("sampled.attempts")
	attrInvalid   = attribute.Key("sampled.answer.invalid")
	attrErrors    = attribute.Key("sampled.answer.errors")
)

// chatSpan starts the span of one provider call, named and attributed as
// the GenAI conventions name an inference ("chat {model}").
func chatSpan(ctx context.Context, prov string, req *Request) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(prov),
		semconv.GenAIRequestModel(req.Model), semconv.GenAIRequestMaxTokens(req.MaxTokens)}
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*req.Temperature))
	}
	if telemetry.Content() {
		attrs = append(attrs, semconv.GenAIInputMessagesKey.String(jsonText(req.Messages)))
		if req.SystemPrompt != "" {
			attrs = append(attrs, semconv.GenAISystemInstructionsKey.String(req.SystemPrompt))
		}
	}
	return telemetry.Start(ctx, "chat "+req.Model, trace.SpanKindClient, attrs...)
}

// endChat ends a provider call's span with its answer or its error.
func endChat(span trace.Span, resp *Response, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		telemetry.Fail(span, err, retry.Reason(err))
		return
	}
	span.SetAttributes(semconv.GenAIResponseModel(resp.Model), semconv.GenAIResponseFinishReasons(resp.StopReason))
	SetUsage(span, resp.Usage)
	if telemetry.Content() {
		span.SetAttributes(semconv.GenAIOutputMessagesKey.String(jsonText(resp.Content)))
	}
}

// SetUsage records u on span: its tokens, as the GenAI conventions name
// them, and its cost in US dollars (sampled.cost_usd).
func SetUsage(span trace.Span, u Usage) {
	span.SetAttributes(semconv.GenAIUsageInputTokens(u.InputTokens), semconv.GenAIUsageOutputTokens(u.OutputTokens),
		attribute.Float64("sampled.cost_usd", u.CostUSD))
}

// guaranteeSpan starts the span of a guaranteed helper's request, whose
// attempts are its children.
func guaranteeSpan(ctx context.Context, method string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, "guarantee "+method, trace.SpanKindInternal, attrGuarantee.String(method))
}

// endGuaranteeSpan ends a guaranteed helper's span, with the number of
// attempts that were answered and the request's error.
func endGuaranteeSpan(span trace.Span, answered int, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrAttempts.Int(answered))
	telemetry.Fail(span, err, "")
}

// attemptSpan starts the span of attempt a of a guaranteed helper: the
// provider calls of the attempt are its children.
func attemptSpan(ctx context.Context, a int) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, "attempt "+strconv.Itoa(a), trace.SpanKindInternal, attrAttempt.Int(a))
}

// invalidAnswer records on an attempt's span why its answer failed: the
// kind and the paths of the errors (their messages with content on).
func invalidAnswer(span trace.Span, kind string, errs []FieldError) {
	if !span.IsRecording() {
		return
	}
	paths := make([]string, len(errs))
	for i, e := range errs {
		paths[i] = e.Path
		if telemetry.Content() {
			paths[i] += ": " + e.Message
		}
	}
	span.SetAttributes(attrInvalid.String(kind), attrErrors.StringSlice(paths))
}

// jsonText is v as JSON, for a span attribute.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
