package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/testing/jaegertest"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// TestTraceInJaeger runs a loop whose tool is on an MCP server that
// samples back through sampled, with tracing exported to a real Jaeger,
// and reads the trace back from Jaeger's query API: one trace, continued
// from the caller's traceparent, with every span in its parent's place.
func TestTraceInJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	cfg := filepath.Join(t.TempDir(), "sampled.yaml")
	yaml := "mcpServers:\n  adviser: {url: " + mcptest.Adviser(t) + "}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, stop, errc := start(t, map[string]string{"SAMPLED_CONFIG": cfg, "OTEL_EXPORTER_OTLP_ENDPOINT": j.OTLP})
	defer stop()

	// The loop may use the adviser's tool once sampled is connected to it.
	testwait.Poll(t, 20*time.Millisecond, 10*time.Second, "the adviser's tool", func() bool {
		resp, err := http.Get("http://" + addr + "/v1/tools")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "adviser__consult")
	})

	const caller, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"prompt":"Consult the adviser on the question: is it wise?","allowedTools":["adviser__*"],` +
		`"toolChoice":{"mode":"required"},"maxIterations":3}`
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/loops", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Traceparent", "00-"+caller+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var traceID, status string
	var usage struct{ InputTokens, OutputTokens int }
	var event, nestedEvent string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			event = name
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if event == "tool.sampling" {
			nestedEvent = data
		}
		var ev struct {
			TraceID, Status, Error string
			Usage                  *struct{ InputTokens, OutputTokens int }
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Status != "" && ev.Usage != nil {
			usage = *ev.Usage
		}
		if ev.TraceID != "" {
			traceID = ev.TraceID
		}
		if ev.Status != "" {
			status = ev.Status + " " + ev.Error
		}
	}
	resp.Body.Close()
	if traceID != caller || strings.TrimSpace(status) != "completed" {
		t.Fatalf("the loop's traceId is %q, its end %q; want the caller's trace %s, completed", traceID, status, caller)
	}
	// The adviser's sampling request shows in the loop's events, tied to
	// its tool call.
	var ns struct {
		Iteration   int
		Name, Model string
		Usage       struct{ OutputTokens int }
	}
	if err := json.Unmarshal([]byte(nestedEvent), &ns); err != nil || ns.Iteration != 1 || ns.Name != "adviser__consult" ||
		ns.Model != "offline/default" || ns.Usage.OutputTokens == 0 {
		t.Errorf("tool.sampling event %q (%v), want iteration 1's call of adviser__consult answered by offline/default", nestedEvent, err)
	}
	// Stopping the service flushes its spans.
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	// The spans the tree must have, each named with its parent's name.
	want := map[string]string{
		"POST /v1/loops":                "",
		"invoke_agent loop":             "POST /v1/loops",
		"iteration 1":                   "invoke_agent loop",
		"iteration 2":                   "invoke_agent loop",
		"chat default":                  "iteration 1",
		"execute_tool adviser__consult": "iteration 1",
		"tools/call consult":            "execute_tool adviser__consult",
		"sampling/createMessage":        "tools/call consult",
	}
	spans := j.Trace(t, caller, 30*time.Second, func(spans []jaegertest.Span) bool {
		seen := map[string]bool{}
		for _, s := range spans {
			seen[s.OperationName] = true
		}
		for name := range want {
			if !seen[name] {
				return false
			}
		}
		return true
	})
	byID := map[string]*jaegertest.Span{}
	for i := range spans {
		byID[spans[i].SpanID] = &spans[i]
	}
	// A name may recur (a chat span per model call): one of its spans
	// must sit under the parent named.
	for name, parent := range want {
		placed := false
		for i := range spans {
			s := &spans[i]
			if s.OperationName != name {
				continue
			}
			if p := byID[s.Parent()]; (parent == "" && s.Parent() == callerSpan) || (p != nil && p.OperationName == parent) {
				placed = true
			}
		}
		if !placed {
			t.Errorf("no span %q under %q (the caller's span %s for the root)", name, parent, callerSpan)
		}
	}
	// The host's sampling for the adviser reached a model: its chat span
	// is the sampling span's child, attributed as the GenAI conventions say.
	var nested *jaegertest.Span
	for i := range spans {
		if p := byID[spans[i].Parent()]; p != nil && p.OperationName == "sampling/createMessage" && strings.HasPrefix(spans[i].OperationName, "chat ") {
			nested = &spans[i]
		}
	}
	if nested == nil {
		t.Fatal("no chat span under sampling/createMessage")
	}
	for key, value := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "offline", "gen_ai.request.model": "default"} {
		if got := nested.Tag(key); got != value {
			t.Errorf("nested chat span: %s = %q, want %q", key, got, value)
		}
	}
	if nested.Tag("gen_ai.usage.output_tokens") == "" {
		t.Error("nested chat span has no gen_ai.usage.output_tokens")
	}
	// The loop's usage is every model call of its trace, the adviser's
	// nested sampling included.
	var in, out int
	for i := range spans {
		if strings.HasPrefix(spans[i].OperationName, "chat ") {
			n, _ := strconv.Atoi(spans[i].Tag("gen_ai.usage.input_tokens"))
			m, _ := strconv.Atoi(spans[i].Tag("gen_ai.usage.output_tokens"))
			in, out = in+n, out+m
		}
	}
	if usage.InputTokens != in || usage.OutputTokens != out {
		t.Errorf("the loop's usage %+v; its trace's model calls used %d in, %d out", usage, in, out)
	}
	if nested.Tag("gen_ai.input.messages") != "" {
		t.Error("a prompt was recorded without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
	}
}
