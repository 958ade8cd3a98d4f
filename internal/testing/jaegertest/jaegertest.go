// Package jaegertest runs Jaeger, the real trace collector, for a test:
// it takes spans over OTLP/HTTP and answers queries for them. The binary
// is the module's pinned tool (tool/go.mod), which .ci/run installs:
//
//	go install -C internal/testing/jaegertest/tool github.com/jaegertracing/jaeger/cmd/jaeger
package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/testing/testlog"
)

// Jaeger is a running collector.
type Jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver (the value of
	// OTEL_EXPORTER_OTLP_ENDPOINT).
	OTLP string
	// Query is the base URL of its query API.
	Query string
}

// Start starts Jaeger with its in-memory store on free loopback ports and
// stops it at the test's end. Without the binary the test is skipped, or
// fails when CI=true.
func Start(t *testing.T) *Jaeger {
	t.Helper()
	bin, err := exec.LookPath("jaeger")
	if err != nil {
		msg := "jaeger is not installed: go install -C internal/testing/jaegertest/tool github.com/jaegertracing/jaeger/cmd/jaeger"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	otlp, query, grpc := freePort(t), freePort(t), freePort(t)
	config := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, query, grpc, otlp)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	logs := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	j := &Jaeger{OTLP: "http://" + otlp, Query: "http://" + query}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(j.Query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && receiving(otlp) {
				return j
			}
		}
		select {
		case <-done:
			t.Fatalf("jaeger exited:\n%s", logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger did not start within 30s:\n%s", logs)
		}
	}
}

// receiving reports whether the OTLP receiver accepts connections.
func receiving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Span is a span as Jaeger's query API returns it.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

// Parent is the id of the span's parent, "" for a root.
func (s *Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of the span's tag key, as text ("" when absent).
func (s *Span) Tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Trace polls for the trace id until done accepts its spans, or fails the
// test after timeout with the spans it last saw.
func (j *Jaeger) Trace(t *testing.T, id string, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var spans []Span
	for {
		spans = j.spans(ctx, id)
		if done(spans) {
			return spans
		}
		select {
		case <-ctx.Done():
			var names []string
			for _, s := range spans {
				names = append(names, s.OperationName)
			}
			t.Fatalf("trace %s: after %s, %d spans: %s", id, timeout, len(spans), strings.Join(names, ", "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (j *Jaeger) spans(ctx context.Context, id string) []Span {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+"/api/traces/"+id, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Spans []Span `json:"spans"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Data) == 0 {
		return nil
	}
	return body.Data[0].Spans
}
