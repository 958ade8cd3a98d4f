package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/testing/testwait"
)

// TestMetricsOfASample checks that the assembled service records a
// sampling request where operators look for it: the request by endpoint and
// outcome (HTTP layer), the upstream call and its tokens (the provider
// wrapper), corrective retries and sampled's own time (the domain's
// observer).
func TestMetricsOfASample(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(context.Background(), Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)

	post := func(path, body string, want int) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("POST %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	post("/v1/sample", `{"prompt":"hi"}`, http.StatusOK)
	post("/v1/sample/schema", `{"prompt":"a person","model":"offline/flaky","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`, http.StatusOK)
	post("/v1/sample", `{"prompt":"hi","model":"nope"}`, http.StatusBadRequest)

	want := `
# HELP sampled_validation_retries_total Corrective retries sent by the guaranteed helpers.
# TYPE sampled_validation_retries_total counter
sampled_validation_retries_total{method="sample"} 0
sampled_validation_retries_total{method="sampleSchema"} 1
sampled_validation_retries_total{method="sampleTools"} 0
`
	wantSamples := `map[endpoint=sample,mode=plain,model=offline/default,outcome=ok,provider=offline:1 ` +
		`endpoint=sample,mode=plain,model=other,outcome=invalid_request,provider=other:1 ` +
		`endpoint=sample_schema,mode=schema,model=offline/flaky,outcome=ok,provider=offline:1]`
	// A sample is counted after its answer is sent: wait for the three.
	// (The configured models' series exist from the start, at 0.)
	var samples map[string]float64
	testwait.Poll(t, time.Millisecond, testwait.Timeout, "three samples counted", func() bool {
		samples = counted(t, reg, "sampled_samples_total")
		return len(samples) == 3
	})
	if got := fmt.Sprint(samples); got != wantSamples {
		t.Errorf("sampled_samples_total = %s, want %s", got, wantSamples)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sampled_validation_retries_total"); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		name string
		want int
	}{
		{"sampled_upstream_request_duration_seconds", 3}, // ok for default and flaky: 1 + 2 attempts
		{"sampled_upstream_token_usage", 6},              // input and output of each call
		{"sampled_gateway_overhead_seconds", 3},          // every request the domain served
	} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, mf := range mfs {
			if mf.GetName() == c.name {
				for _, m := range mf.GetMetric() {
					got += int(m.GetHistogram().GetSampleCount())
				}
			}
		}
		if got != c.want {
			t.Errorf("%s observed %d times, want %d", c.name, got, c.want)
		}
	}
}

// counted returns the series of the counter name that are not 0, by their
// labels (name=value, sorted by name).
func counted(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() != name || m.GetCounter().GetValue() == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetCounter().GetValue()
		}
	}
	return out
}

// BenchmarkSampleOpenAI measures one plain request through the assembled
// service, handler to upstream and back, against a zero-latency fake of
// OpenAI's chat completions (the client side is a recorder: no network on
// the way in).
func BenchmarkSampleOpenAI(b *testing.B) {
	const reply = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Paris.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	b.Cleanup(up.Close)
	env := map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": up.URL + "/v1", "SAMPLING_MODEL": "gpt-4o-mini"}
	cfg := loadConfig(b, env, "")
	a, err := New(context.Background(), Options{Config: cfg, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	body := []byte(`{"prompt":"What is the capital of France?","maxTokens":100}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/sample", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		a.Handler.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
