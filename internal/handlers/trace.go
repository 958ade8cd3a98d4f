package handlers

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sampled/sampled/internal/telemetry"
)

// requestSpan starts the server span of an HTTP request. It is named by
// its method until the route is known (endRequestSpan).
func requestSpan(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, telemetry.NoSpan()
	}
	return telemetry.Start(ctx, r.Method, trace.SpanKindServer, semconv.HTTPRequestMethodKey.String(r.Method))
}

// endRequestSpan names a request's span by its method and route, as the
// HTTP conventions do, and ends it with the answer's status: a 5xx is an
// error of the server's.
func endRequestSpan(span trace.Span, method, route string, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}
