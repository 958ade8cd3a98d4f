package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkTwoSpans is the floor of what tracing a plain request costs:
// the two spans sampled makes for it (the HTTP request's and its chat
// call's), with the same attributes, recorded and exported over OTLP/HTTP
// to a receiver that discards them, and nothing else. cpu-µs/op is the
// process's CPU time (every goroutine: the batch processor and the
// exporter too) per request.
func BenchmarkTwoSpans(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	shutdown, err := Setup(context.Background(), func(k string) string {
		if k == EnvEndpoint {
			return sink.URL
		}
		return ""
	}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	// Flushing every 256 requests (512 spans, one default batch) keeps
	// the batch processor's queue from filling and dropping spans, as the
	// service's rate does not: every span is exported.
	tp := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	ctx := context.Background()
	cpu0 := cpuTime()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n++; n%256 == 0 {
			_ = tp.ForceFlush(ctx)
		}
		rctx, req := Start(ctx, "POST", trace.SpanKindServer, semconv.HTTPRequestMethodKey.String("POST"))
		_, chat := Start(rctx, "chat gpt-4o-mini", trace.SpanKindClient, semconv.GenAIOperationNameChat,
			semconv.GenAIProviderNameKey.String("openai"), semconv.GenAIRequestModel("gpt-4o-mini"), semconv.GenAIRequestMaxTokens(100))
		chat.SetAttributes(semconv.GenAIResponseModel("gpt-4o-mini"), semconv.GenAIResponseFinishReasons("endTurn"),
			semconv.GenAIUsageInputTokens(14), semconv.GenAIUsageOutputTokens(8), attrCost.Float64(0.0000115))
		chat.End()
		req.SetName("POST /v1/sample")
		req.SetAttributes(semconv.HTTPRoute("/v1/sample"), semconv.HTTPResponseStatusCode(200))
		req.End()
	}
	_ = shutdown(context.Background()) // the last batch's export counts too
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

var attrCost = attribute.Key("sampled.cost_usd")

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
