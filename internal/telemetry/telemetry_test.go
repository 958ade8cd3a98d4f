package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestOffWithoutEndpoint(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{EnvEndpoint: "http://127.0.0.1:4318", EnvDisabled: "true"},
		{EnvEndpoint: "http://127.0.0.1:4318", EnvExporter: "none"},
	} {
		shutdown, err := Setup(context.Background(), func(k string) string { return env[k] }, "test")
		if err != nil || Enabled() {
			t.Fatalf("%v: enabled %v, err %v; want off", env, Enabled(), err)
		}
		_ = shutdown(context.Background())
	}
}

// Off, a span costs nothing: no allocation, the context unchanged.
func TestStartOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := Start(ctx, "", 0)
		span.End()
		if c != ctx {
			t.Fatal("Start changed the context while off")
		}
	})
	if allocs != 0 {
		t.Errorf("Start while off allocates %v times, want 0", allocs)
	}
}

func TestSetupOnAndOff(t *testing.T) {
	env := map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvContent: "true"}
	shutdown, err := Setup(context.Background(), func(k string) string { return env[k] }, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() || !Content() {
		t.Fatalf("enabled %v, content %v; want both on", Enabled(), Content())
	}
	ctx, span := Start(Extract(context.Background(), http.Header{"Traceparent": {parent}}), "op", 0)
	if !span.IsRecording() || TraceID(ctx) != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("recording %v, trace %q: want a recording child of the caller's trace", span.IsRecording(), TraceID(ctx))
	}
	span.End()
	_ = shutdown(context.Background()) // the endpoint is unreachable: the export fails, quietly
	if Enabled() || Content() {
		t.Error("still on after shutdown")
	}
}

// The trace context crosses MCP in _meta: what InjectMeta writes,
// ExtractMeta reads back, beside the other keys.
func TestMetaRoundTrip(t *testing.T) {
	ctx := Extract(context.Background(), http.Header{"Traceparent": {parent}, "Tracestate": {"vendor=x"}})
	meta := InjectMeta(ctx, map[string]any{"progressToken": 1})
	if meta["traceparent"] != parent || meta["tracestate"] != "vendor=x" || meta["progressToken"] != 1 {
		t.Fatalf("meta %v", meta)
	}
	if got := TraceID(ExtractMeta(context.Background(), meta)); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace from meta %q", got)
	}
	if m := InjectMeta(context.Background(), nil); m != nil {
		t.Errorf("meta without a trace: %v, want nil", m)
	}
	if got := TraceID(ExtractMeta(context.Background(), map[string]any{"traceparent": "garbage"})); got != "" {
		t.Errorf("a malformed traceparent gave trace %q", got)
	}
}

func TestLogHandlerAddsIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil))).With("k", "v")
	log.InfoContext(Extract(context.Background(), http.Header{"Traceparent": {parent}}), "with")
	log.InfoContext(context.Background(), "without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7") ||
		strings.Contains(lines[1], "trace_id") || !strings.Contains(lines[0], "k=v") {
		t.Errorf("log:\n%s", buf.String())
	}
}

// The trace context goes out on an upstream request, in a copy of it;
// the caller's baggage does not.
func TestTransportSendsTraceContext(t *testing.T) {
	env := map[string]string{EnvEndpoint: "http://127.0.0.1:1"}
	shutdown, err := Setup(context.Background(), func(k string) string { return env[k] }, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	var got http.Header
	rt := Transport(roundTripper(func(r *http.Request) (*http.Response, error) {
		got = r.Header
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}))
	ctx := Extract(context.Background(), http.Header{"Traceparent": {parent}, "Baggage": {"user=alice"}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.invalid/v1/chat/completions", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got.Get("Traceparent") != parent || got.Get("Baggage") != "" || req.Header.Get("Traceparent") != "" {
		t.Errorf("sent %v (the caller's request keeps %v); want the traceparent alone, on a copy", got, req.Header)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
