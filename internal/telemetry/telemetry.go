// Package telemetry traces sampled's work with OpenTelemetry: spans named
// and attributed as the GenAI and MCP semantic conventions say, W3C trace
// context in and out (HTTP headers, MCP's _meta), and an OTLP/HTTP export
// configured by the standard OTEL_* variables.
//
// Tracing is off unless Setup finds an OTLP endpoint. Off, Start returns
// the context it was given and a span that does nothing, without
// allocating, so the service pays nothing for spans it does not export.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of sampled's spans.
const Name = "github.com/sampled/sampled"

var (
	enabled atomic.Bool
	content atomic.Bool
	tracer  atomic.Pointer[trace.Tracer]
	// propagator reads and writes W3C trace context and baggage, in HTTP
	// headers and in MCP's _meta, whether or not tracing is on.
	propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	noSpan     = trace.SpanFromContext(context.Background())
)

// Enabled reports whether spans are recorded and exported.
func Enabled() bool { return enabled.Load() }

// Content reports whether prompts, answers and tool arguments and results
// are recorded on spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT).
func Content() bool { return content.Load() }

// The variables Setup reads itself; the exporter and the SDK read the
// other OTEL_* variables (headers, timeouts, the sampler, the resource)
// from the process's environment.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvDisabled       = "OTEL_SDK_DISABLED"
	EnvExporter       = "OTEL_TRACES_EXPORTER"
	EnvContent        = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
)

// Setup turns tracing on when getenv names an OTLP endpoint (the traces'
// own, or the general one to which /v1/traces is added), unless
// OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is none. Spans go out
// in batches over OTLP/HTTP; the sampler is OTEL_TRACES_SAMPLER's (parent
// based, always on by default) and the service is named "sampled" unless
// OTEL_SERVICE_NAME says otherwise. shutdown flushes the spans and turns
// tracing off again.
func Setup(ctx context.Context, getenv func(string) string, version string) (shutdown func(context.Context) error, err error) {
	off := func(context.Context) error { return nil }
	endpoint := getenv(EnvTracesEndpoint)
	if endpoint == "" && getenv(EnvEndpoint) != "" {
		endpoint = strings.TrimRight(getenv(EnvEndpoint), "/") + "/v1/traces"
	}
	if endpoint == "" || strings.EqualFold(getenv(EnvDisabled), "true") || strings.EqualFold(getenv(EnvExporter), "none") {
		return off, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return off, fmt.Errorf("telemetry: %s: %w", EnvTracesEndpoint, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("sampled"), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return off, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	t := tp.Tracer(Name, trace.WithInstrumentationVersion(version))
	tracer.Store(&t)
	content.Store(strings.EqualFold(getenv(EnvContent), "true"))
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		content.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// NoSpan is a span that records nothing: what a caller that found
// tracing off (Enabled) returns, without making the name and attributes
// of a span no one records.
func NoSpan() trace.Span { return noSpan }

// Start starts a span named name as a child of ctx's span (or of the
// remote span context Extract put there). Off, it returns ctx and a span
// that does nothing.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	return (*tracer.Load()).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Fail marks span failed by err, with the error.type the conventions ask
// for (errType, or the error's Go type when empty).
func Fail(span trace.Span, err error, errType string) {
	if err == nil || !span.IsRecording() {
		return
	}
	if errType == "" {
		errType = fmt.Sprintf("%T", err)
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	span.SetStatus(codes.Error, err.Error())
}

// errToolError is the status of a tool call whose result has isError.
var errToolError = errors.New("the tool answered isError")

// FailTool marks span failed by a tool result with isError: error.type
// tool_error.
func FailTool(span trace.Span) { Fail(span, errToolError, "tool_error") }

// Extract returns ctx with the trace context of an incoming request's
// headers (traceparent, tracestate, baggage), when it has any.
func Extract(ctx context.Context, h http.Header) context.Context {
	if len(h["Traceparent"]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// TraceID is the id of ctx's trace in its W3C form (32 hex digits), or ""
// when ctx is in none.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// Transport returns rt wrapped to send the trace context of each
// request's context in its headers (traceparent, tracestate; not the
// caller's baggage, which is not a provider's business);
// off, rt itself. It makes no span of its own: the caller's span (a
// provider call's "chat", an MCP call's "tools/call") is the client span
// of the request.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if !enabled.Load() {
		return rt
	}
	return injecting{rt}
}

type injecting struct{ next http.RoundTripper }

func (t injecting) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.next.RoundTrip(req)
	}
	// A RoundTripper leaves the request it is given as it is.
	r := *req
	r.Header = req.Header.Clone()
	// Trace context only: a caller's baggage is not sent on to a provider.
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(r.Header))
	return t.next.RoundTrip(&r)
}

// metaCarrier lets the propagator read and write trace context in an MCP
// request's _meta, where the keys are traceparent, tracestate and baggage
// (MCP's trace-context convention, SEP-414).
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// InjectMeta adds ctx's trace context to an MCP request's _meta and
// returns it (a new map when meta is nil). Without a trace, it returns meta
// unchanged.
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = map[string]any{}
	}
	propagator.Inject(ctx, metaCarrier(meta))
	return meta
}

// ExtractMeta returns ctx with the trace context of an MCP request's
// _meta, when it has one.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if _, ok := meta["traceparent"]; !ok {
		return ctx
	}
	return propagator.Extract(ctx, metaCarrier(meta))
}

// LogHandler adds the trace_id and span_id of the record's context to each
// record h handles.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
