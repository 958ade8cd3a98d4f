package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sampled/sampled/internal/telemetry"
)

// subOTLP is the local OTLP/HTTP receiver of the tracing measurement: it
// takes every export and keeps nothing but a count.
const subOTLP = "-side-otlp"

// newOTLPSink answers OTLP/HTTP exports with an empty success, as a
// collector does, and counts them at GET /count.
func newOTLPSink() http.Handler {
	var exports atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, exports.Load())
	})
	return mux
}

const (
	traceOff = "off"
	traceOn  = "on"
)

// runTrace measures what tracing costs: sampled with tracing off beside
// the same build with tracing on, exporting every span to a local OTLP
// receiver; each in its own process, in alternating rounds.
func runTrace(ctx context.Context, o sideOptions, stdout io.Writer) error {
	modes, err := sideModes()
	if err != nil {
		return err
	}
	fake, err := startChild(ctx, subFake)
	if err != nil {
		return err
	}
	defer fake.stop()
	sink, err := startChild(ctx, subOTLP)
	if err != nil {
		return err
	}
	defer sink.stop()
	gw, name := subSampled, "sampled"
	if o.floor {
		gw, name = subFloor, "the floor gateway"
	}
	gateways := map[string]*child{}
	for side, args := range map[string][]string{traceOff: nil, traceOn: {"-otlp", sink.url}} {
		g, err := startChild(ctx, append([]string{gw, "-upstream", fake.url}, args...)...)
		if err != nil {
			return err
		}
		defer g.stop()
		gateways[side] = g
	}
	url := func(side string) string { return gateways[side].url + "/v1/sample" }

	fmt.Fprintf(stdout, "tracing: %s with tracing off and on (every span exported to a local OTLP receiver), each in its own process\n", name)
	fmt.Fprintf(stdout, "%d rounds; c=1 latency over %d requests to each side, interleaved, c=%d throughput for %s\n", o.rounds, o.n, o.c, o.d)
	for _, m := range modes {
		for _, side := range []string{traceOff, traceOn} {
			if _, err := runClient(ctx, url(side), m.body, o.c, 0, min(o.d, time.Second)); err != nil {
				return fmt.Errorf("warm-up %s %s: %w", m.name, side, err)
			}
		}
	}
	vals := samples{}
	add := vals.add
	for r := range o.rounds {
		order := inTurn(r, traceOff, traceOn)
		fmt.Fprintf(stdout, "round %d/%d: tracing %s first\n", r+1, o.rounds, order[0])
		for _, m := range modes {
			targets := []target{{URL: url(order[0]), Body: m.body}, {URL: url(order[1]), Body: m.body}}
			res, err := runInterleaved(ctx, targets, o.n)
			if err != nil {
				return fmt.Errorf("%s c=1: %w", m.name, err)
			}
			for i, side := range order {
				add(m.name, side, mP50, float64(res[i].P50Ns)/1e3)
				fmt.Fprintf(stdout, "  %-6s tracing %-3s c=1   p50 %6.0fµs\n", m.name, side, float64(res[i].P50Ns)/1e3)
			}
			for _, side := range order {
				res, err := measureThroughput(ctx, gateways[side].pid(), fake.pid(), url(side), m.body, o.c, o.d)
				if err != nil {
					return fmt.Errorf("%s %s c=%d: %w", m.name, side, o.c, err)
				}
				add(m.name, side, mRPS, res.perSecond())
				add(m.name, side, mCPU, res.gateway)
				fmt.Fprintf(stdout, "  %-6s tracing %-3s c=%-3d %6.0f req/s  %6.1fµs CPU/request\n", m.name, side, o.c, res.perSecond(), res.gateway)
			}
		}
	}
	exports, err := httpGetText(ctx, sink.url+"/count")
	if err != nil {
		return err
	}
	if n, _ := strconv.Atoi(exports); n == 0 {
		return fmt.Errorf("the OTLP receiver got no export: tracing was not on")
	}
	paired := func(mode, metric string, f func(on, off float64) float64) float64 {
		return vals.paired(mode, metric, traceOn, traceOff, f)
	}
	fmt.Fprintf(stdout, "\nmedians of %d rounds, on/off the median of the rounds' ratios (differences for latency); %s exports received\n", o.rounds, exports)
	for _, m := range modes {
		fmt.Fprintf(stdout, "%-6s CPU/request off %.1fµs on %.1fµs: ×%.2f; c=%d req/s ×%.2f; c=1 p50 %+.0fµs\n", m.name,
			median(vals[sideKey{m.name, traceOff, mCPU}]), median(vals[sideKey{m.name, traceOn, mCPU}]),
			paired(m.name, mCPU, ratio), o.c, paired(m.name, mRPS, ratio), paired(m.name, mP50, diff))
	}
	if o.cpuprofile == "" {
		return nil
	}
	for _, side := range []string{traceOff, traceOn} {
		path := profilePath(o.cpuprofile, "tracing-"+side, modes[0].name)
		g := gateways[side]
		if err := g.command("profile " + path); err != nil {
			return err
		}
		res, err := measureThroughput(ctx, g.pid(), fake.pid(), url(side), modes[0].body, o.c, o.d)
		if err != nil {
			return err
		}
		if err := g.command("stop-profile"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "CPU profile of tracing %s, %s, c=%d: %s (%.1fµs CPU/request while profiled)\n", side, modes[0].name, o.c, path, res.gateway)
	}
	return nil
}

// httpGetText returns the body of a GET of url.
func httpGetText(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// newTracedFloor is the floor with the spans sampled makes for a plain
// request, by the least code: the HTTP request's server span, and the chat
// call's client span with the call's trace context in its headers, each
// with sampled's attribute keys. The values the floor does not read from
// the reply (response model, finish reason, tokens, cost) are constants;
// a span costs the same whatever its values. Tracing must be on.
func newTracedFloor(chatURL string) http.Handler {
	f := newFloorGateway(chatURL)
	f.client.Transport = chatSpans{telemetry.Transport(f.client.Transport)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := telemetry.Start(telemetry.Extract(r.Context(), r.Header), r.Method, trace.SpanKindServer,
			semconv.HTTPRequestMethodKey.String(r.Method))
		f.ServeHTTP(w, r.WithContext(ctx))
		span.SetName(r.Method + " " + r.URL.Path)
		span.SetAttributes(semconv.HTTPRoute(r.URL.Path), semconv.HTTPResponseStatusCode(http.StatusOK))
		span.End()
	})
}

// chatSpans wraps each upstream call in a chat span.
type chatSpans struct{ next http.RoundTripper }

func (c chatSpans) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := telemetry.Start(req.Context(), "chat gpt-4o-mini", trace.SpanKindClient, semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String("openai"), semconv.GenAIRequestModel("gpt-4o-mini"), semconv.GenAIRequestMaxTokens(100))
	defer span.End()
	resp, err := c.next.RoundTrip(req.WithContext(ctx))
	span.SetAttributes(semconv.GenAIResponseModel("gpt-4o-mini"), semconv.GenAIResponseFinishReasons("stop"),
		semconv.GenAIUsageInputTokens(14), semconv.GenAIUsageOutputTokens(7), attribute.Float64("sampled.cost_usd", 0))
	return resp, err
}
