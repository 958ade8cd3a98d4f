package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/mcpschema"
	"github.com/sampled/sampled/internal/testing/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends body and returns the status and decoded JSON answer.
func (s *stack) post(t *testing.T, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, raw)
	}
	return resp.StatusCode, resp.Header, out
}

func errorPaths(out map[string]any) []string {
	var paths []string
	errs, _ := out["errors"].([]any)
	for _, e := range errs {
		paths = append(paths, e.(map[string]any)["path"].(string))
	}
	return paths
}

func TestSampleBadRequests(t *testing.T) {
	s := startStack(t, 0)
	tool := `{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	tests := []struct {
		name, body, wantPath string
		wantStatus           int
	}{
		{"neither prompt nor messages", `{}`, "/prompt", 400},
		{"both prompt and messages", `{"prompt":"a","messages":[{"role":"user","content":{"type":"text","text":"b"}}]}`, "/prompt", 400},
		{"schema and tools", `{"prompt":"a","schema":{"type":"object"},"tools":[` + tool + `]}`, "/tools", 400},
		{"invalid schema", `{"prompt":"a","schema":{"type":"object","properties":{"n":{"type":"nmber"}}}}`, "/schema/properties/n/type", 400},
		{"tool_result mixed with text", `{"messages":[{"role":"user","content":{"type":"text","text":"w?"}},{"role":"assistant","content":{"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Oslo"}}},{"role":"user","content":[{"type":"tool_result","toolUseId":"c1","content":[]},{"type":"text","text":"x"}]}],"tools":[` + tool + `]}`, "/messages/2/content", 400},
		{"tool_use unanswered", `{"messages":[{"role":"user","content":{"type":"text","text":"w?"}},{"role":"assistant","content":{"type":"tool_use","id":"c1","name":"get_weather","input":{}}},{"role":"user","content":{"type":"text","text":"?"}}]}`, "/messages/1/content", 400},
		{"unknown model", `{"prompt":"a","model":"nowhere/none"}`, "/model", 400},
		{"maxTokens zero", `{"prompt":"a","maxTokens":0}`, "/maxTokens", 400},
		{"maxTokens negative", `{"prompt":"a","maxTokens":-4}`, "/maxTokens", 400},
		{"maxTokens wrong type", `{"prompt":"a","maxTokens":"ten"}`, "/maxTokens", 400},
		{"unknown member", `{"prompt":"a","max_tokens":5}`, "/max_tokens", 400},
		{"not JSON", `{"prompt":`, "/", 400},
		{"bad block", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"b"}]}]}`, "/messages/0/content/1", 400},
		{"bad toolChoice mode", `{"prompt":"a","tools":[` + tool + `],"toolChoice":{"mode":"sometimes"}}`, "/toolChoice/mode", 400},
		{"retries out of range", `{"prompt":"a","schema":{"type":"object"},"retries":99}`, "/retries", 400},
		{"retries on plain sample", `{"prompt":"a","retries":1}`, "/retries", 400},
		{"tool name of the wrong type", `{"prompt":"a","tools":[` + tool + `,{"name":5,"inputSchema":{"type":"object"}}]}`, "/tools/1/name", 400},
		{"maxTokens not an integer", `{"prompt":"a","maxTokens":1.5}`, "/maxTokens", 400},
		{"two JSON values", `{"prompt":"a"} {"prompt":"b"}`, "/", 400},
		// Members of nested objects that decode themselves are named from
		// the body's root.
		{"preference of the wrong type", `{"prompt":"a","modelPreferences":{"costPriority":"high"}}`, "/modelPreferences/costPriority", 400},
		{"toolChoice member of the wrong type", `{"prompt":"a","tools":[` + tool + `],"toolChoice":{"mode":"auto","disableParallelToolUse":"yes"}}`, "/toolChoice/disableParallelToolUse", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/v1/sample"
			if strings.Contains(tt.body, "retries\":99") {
				path = "/v1/sample/schema"
			}
			status, h, out := s.post(t, path, tt.body)
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %v", status, tt.wantStatus, out)
			}
			if ct := h.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("content type %q", ct)
			}
			if paths := errorPaths(out); !contains(paths, tt.wantPath) {
				t.Errorf("error paths %v do not name %s (%v)", paths, tt.wantPath, out["detail"])
			}
		})
	}
}

// TestBodyErrorDetails pins what a client reads of a body that cannot be
// decoded: the path and a message in JSON's terms, never a Go type.
func TestBodyErrorDetails(t *testing.T) {
	s := startStack(t, 0)
	for body, want := range map[string]string{
		``:                                 `/: the body is empty; send a JSON object`,
		" \n":                              `/: the body is empty; send a JSON object`,
		`{"prompt":"a","maxTokens":"ten"}`: `/maxTokens: must be an integer, not string`,
		`{"prompt":"a","maxTokens":1.5}`:   `/maxTokens: must be an integer, not number 1.5`,
		`{"prompt":["a"]}`:                 `/prompt: must be a string, not array`,
		`{"prompt":"a","max_tokens":5}`:    `/max_tokens: unknown member "max_tokens"`,
		`{"prompt":"a"} {"prompt":"b"}`:    `/: the body holds more than one JSON value`,
		`{"prompt":"a"}x`:                  `/: the body holds more than one JSON value`,
		`{"prompt":"a",}`:                  `/: not valid JSON (at byte `, // the decoder's offset
		`[1]`:                              `/: must be an object, not array`,
		`{"prompt":"a","tools":[{"name":5,"inputSchema":{"type":"object"}}]}`: `/tools/0/name: must be a string, not number`,
		// A member that decodes itself says what it takes.
		`{"prompt":"a","toolChoice":5}`: `/toolChoice: toolChoice must be a string or an object with mode`,
	} {
		status, _, out := s.post(t, "/v1/sample", body)
		detail, _ := out["detail"].(string)
		if status != http.StatusBadRequest || !strings.HasPrefix(detail, want) || (detail != want && !strings.HasSuffix(want, "(at byte ")) {
			t.Errorf("%q: %d %v, want 400 %q", body, status, out["detail"], want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestOpenNestedObjects(t *testing.T) {
	s := startStack(t, 0)
	// MCP leaves Tool and ModelHint open: extra members are accepted.
	status, _, out := s.post(t, "/v1/sample", `{"prompt":"a","modelPreferences":{"hints":[{"name":"default","extra":1}]},"tools":[{"name":"t","inputSchema":{"type":"object"},"title":"T","x-vendor":true}]}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
}

func TestMethodNotAllowedSaysAllow(t *testing.T) {
	s := startStack(t, 0)
	resp, err := http.Get(s.url + "/v1/sample")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("status %d, Allow %q; want 405 and POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestBodyLimit(t *testing.T) {
	s := startStack(t, 64)
	status, _, out := s.post(t, "/v1/sample", `{"prompt":"`+strings.Repeat("x", 100)+`"}`)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413: %v", status, out)
	}
}

func TestSampleModes(t *testing.T) {
	s := startStack(t, 0)
	t.Run("plain", func(t *testing.T) {
		status, _, out := s.post(t, "/v1/sample", `{"prompt":"Tell me about otters"}`)
		if status != 200 || !strings.Contains(out["text"].(string), "Tell me about otters") {
			t.Fatalf("status %d, answer %v", status, out)
		}
		for _, k := range []string{"parsed", "parseError", "toolCalls"} {
			if _, ok := out[k]; ok {
				t.Errorf("plain answer has %s", k)
			}
		}
		if out["provider"] != "offline" || out["model"] != "default" || out["attempts"] != 1.0 || out["role"] != "assistant" {
			t.Errorf("answer %v", out)
		}
	})
	t.Run("schema", func(t *testing.T) {
		status, _, out := s.post(t, "/v1/sample", `{"prompt":"a person","schema":{"type":"object","properties":{"email":{"type":"string","format":"email"}},"required":["email"]}}`)
		parsed, _ := out["parsed"].(map[string]any)
		if status != 200 || parsed["email"] == nil {
			t.Fatalf("status %d, answer %v", status, out)
		}
	})
	t.Run("schema parse error", func(t *testing.T) {
		status, _, out := s.post(t, "/v1/sample", `{"prompt":"a person","model":"offline/broken","schema":{"type":"object"}}`)
		if status != 200 || out["parsed"] != nil || out["parseError"] == nil {
			t.Fatalf("status %d, answer %v", status, out)
		}
		if _, ok := out["parsed"]; !ok {
			t.Error("parsed is absent; want null")
		}
	})
	t.Run("tools with draft tool_choice", func(t *testing.T) {
		status, _, out := s.post(t, "/v1/sample", `{"prompt":"hi","tools":[{"name":"lookup","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}],"tool_choice":"required"}`)
		calls, _ := out["toolCalls"].([]any)
		if status != 200 || len(calls) != 1 || out["stopReason"] != "toolUse" {
			t.Fatalf("status %d, answer %v", status, out)
		}
	})
	t.Run("tools without a call", func(t *testing.T) {
		status, _, out := s.post(t, "/v1/sample", `{"prompt":"hi","tools":[{"name":"lookup","inputSchema":{"type":"object"}}],"toolChoice":{"mode":"none"}}`)
		calls, ok := out["toolCalls"].([]any)
		if status != 200 || !ok || len(calls) != 0 {
			t.Fatalf("status %d, answer %v; want toolCalls: []", status, out)
		}
	})
}

// TestValidationMetrics drives offline/flaky and offline/broken through both
// guaranteed helpers and checks each counter moves by exactly the expected
// amount.
func TestValidationMetrics(t *testing.T) {
	s := startStack(t, 0)
	schemaBody := func(model string) string {
		return `{"prompt":"a city","model":"` + model + `","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`
	}
	toolsBody := func(model string) string {
		return `{"prompt":"weather","model":"` + model + `","tools":[{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`
	}
	m := s.metrics
	type want struct {
		status, attempts int
	}
	steps := []struct {
		path, body string
		want       want
	}{
		{"/v1/sample/schema", schemaBody("offline/flaky"), want{200, 2}},
		{"/v1/sample/schema", schemaBody("offline/broken"), want{422, 3}},
		{"/v1/sample/tools", toolsBody("offline/flaky"), want{200, 2}},
		{"/v1/sample/tools", toolsBody("offline/broken"), want{422, 3}},
		{"/v1/sample/schema", schemaBody("offline/default"), want{200, 1}},
	}
	for _, st := range steps {
		status, _, out := s.post(t, st.path, st.body)
		if status != st.want.status || out["attempts"] != float64(st.want.attempts) {
			t.Fatalf("%s %s: status %d attempts %v, want %+v", st.path, st.body, status, out["attempts"], st.want)
		}
		if status == 422 {
			if out["method"] == nil || out["lastResult"] == nil || len(errorPaths(out)) == 0 {
				t.Errorf("422 problem lacks method/lastResult/errors: %v", out)
			}
		}
	}
	counts := []struct {
		name string
		c    prometheus.Collector
		want float64
		late bool // counted after the answer is sent
	}{
		{"schema invalid_json", m.ValidationFailures.WithLabelValues("sampleSchema", "invalid_json"), 1 + 3, false},
		{"tools no_tool_call", m.ValidationFailures.WithLabelValues("sampleTools", "no_tool_call"), 1 + 3, false},
		{"schema retries", m.ValidationRetries.WithLabelValues("sampleSchema"), 1 + 2, false},
		{"tools retries", m.ValidationRetries.WithLabelValues("sampleTools"), 1 + 2, false},
		{"schema exhausted", m.ValidationExhausted.WithLabelValues("sampleSchema"), 1, false},
		{"tools exhausted", m.ValidationExhausted.WithLabelValues("sampleTools"), 1, false},
		{"schema ok", m.Samples.WithLabelValues("sample_schema", "schema", "offline", "offline/flaky", "ok"), 1, true},
		{"schema exhausted outcome", m.Samples.WithLabelValues("sample_schema", "schema", "offline", "offline/broken", "exhausted"), 1, true},
		{"tools exhausted outcome", m.Samples.WithLabelValues("sample_tools", "tools", "offline", "offline/broken", "exhausted"), 1, true},
		{"no upstream retries", m.UpstreamRetries.WithLabelValues("offline", "server_error"), 0, false},
	}
	testwait.Poll(t, time.Millisecond, testwait.Timeout, "the samples counted", func() bool {
		for _, c := range counts {
			if c.late && testutil.ToFloat64(c.c) < c.want {
				return false
			}
		}
		return true
	})
	for _, c := range counts {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	// The same numbers are on GET /metrics.
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`sampled_sample_validation_errors_total{method="sampleSchema"} 1`,
		`sampled_validation_retries_total{method="sampleTools"} 3`,
		`sampled_validation_failures_total{kind="invalid_json",method="sampleSchema"} 4`,
	} {
		if !bytes.Contains(body, []byte(line)) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

func TestMessagesEndpoint(t *testing.T) {
	s := startStack(t, 0)
	v, err := mcpschema.Load("../../reference/mcp/schema-2025-11-25.json")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../reference/mcp/examples/CreateMessageRequestParams/*.json")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Validate("CreateMessageRequestParams", body); err != nil {
				t.Fatalf("fixture: %v", err)
			}
			resp, err := http.Post(s.url+"/v1/messages", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			if err := v.Validate("CreateMessageResult", raw); err != nil {
				t.Errorf("%v\n%s", err, raw)
			}
			var res sampler.CreateMessageResult
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			single := bytes.Contains(raw, []byte(`"content":{`))
			if single != (len(res.Content) == 1) {
				t.Errorf("content shape: %s", raw)
			}
		})
	}
	t.Run("invalid params", func(t *testing.T) {
		status, _, out := s.post(t, "/v1/messages", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`)
		if status != 400 || out["code"] != float64(-32602) || !contains(errorPaths(out), "/maxTokens") {
			t.Fatalf("status %d: %v", status, out)
		}
	})
}

// blocking is a provider that waits for its context to end and reports it.
type blocking struct {
	started, cancelled chan struct{}
}

func (b *blocking) Name() string { return "blocking" }

func (b *blocking) Sample(ctx context.Context, _ *sampler.Request) (*sampler.Response, error) {
	close(b.started)
	<-ctx.Done()
	close(b.cancelled)
	return nil, ctx.Err()
}

func TestClientGoneCancelsWork(t *testing.T) {
	b := &blocking{started: make(chan struct{}), cancelled: make(chan struct{})}
	s := startStack(t, 0, b)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/sample", strings.NewReader(`{"prompt":"hi","model":"blocking/m"}`))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-b.started
	cancel()
	<-b.cancelled
	if err := <-done; err == nil {
		t.Error("the request succeeded after its client went away")
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	// Counted as 499 (client closed request) and cancelled, never as 200.
	gone := s.metrics.HTTPRequests.WithLabelValues("/v1/sample", "POST", "499")
	testwait.Poll(t, time.Millisecond, testwait.Timeout, "the request to be counted", func() bool { return testutil.ToFloat64(gone) == 1 })
	if n := testutil.ToFloat64(s.metrics.HTTPRequests.WithLabelValues("/v1/sample", "POST", "200")); n != 0 {
		t.Errorf("counted %v times as 200", n)
	}
	if n := testutil.ToFloat64(s.metrics.Samples.WithLabelValues("sample", "plain", "other", "other", "cancelled")); n != 1 {
		t.Errorf("samples cancelled = %v, want 1", n)
	}
}

func TestProblemForUnknownRoute(t *testing.T) {
	s := startStack(t, 0)
	resp, err := http.Get(s.url + "/v2/nothing")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&p)
	if diff := cmp.Diff([]any{404.0, "application/problem+json"}, []any{p["status"], resp.Header.Get("Content-Type")}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Error("no X-Request-ID")
	}
}

// TestDeepBodies: a body nesting deeper than the limit is a 400 naming the
// limit, before anything decodes it; a schema deeper than its own limit is
// a 400 at /schema, before it is compiled.
func TestDeepBodies(t *testing.T) {
	s := startStack(t, 0)
	deepSchema := strings.Repeat(`{"type":"array","items":`, 70) + `{}` + strings.Repeat(`}`, 70)
	tests := []struct {
		name, body, wantPath, wantMessage string
	}{
		{"body", `{"prompt":"hi","metadata":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
			"/", "the body nests 10001 levels deep; the limit is 80"},
		{"schema", `{"prompt":"hi","schema":` + deepSchema + `}`, "/schema", "the schema nests 71 levels deep; the limit is 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, out := s.post(t, "/v1/sample", tt.body)
			errs, _ := out["errors"].([]any)
			if status != http.StatusBadRequest || len(errs) == 0 {
				t.Fatalf("status %d: %v", status, out)
			}
			first := errs[0].(map[string]any)
			if diff := cmp.Diff([]any{tt.wantPath, tt.wantMessage}, []any{first["path"], first["message"]}); diff != "" {
				t.Errorf("first error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProblemsEchoLittle: a problem about a huge input names it, cut short:
// a 1 MB tool name does not come back twice in the answer.
func TestProblemsEchoLittle(t *testing.T) {
	s := startStack(t, 0)
	name := strings.Repeat("n", 1<<20)
	body := `{"prompt":"hi","tools":[{"name":"get_weather","inputSchema":{"type":"object"}}],"toolChoice":{"mode":"tool","name":"` + name + `"}}`
	resp, err := http.Post(s.url+"/v1/sample", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || len(raw) > 4096 || !strings.Contains(string(raw), "/toolChoice/name") {
		t.Fatalf("status %d, %d bytes: %.300s", resp.StatusCode, len(raw), raw)
	}
}

// TestSmallSchemaHugeAnswer: a 171-byte schema whose every value weighs
// gigabytes is refused with a 400 at /schema, not answered with megabytes.
func TestSmallSchemaHugeAnswer(t *testing.T) {
	s := startStack(t, 0)
	schema := `{"type":"array","minItems":10000,"items":{"type":"array","minItems":10000,"items":{"type":"string","minLength":100}}}`
	status, _, out := s.post(t, "/v1/sample", `{"prompt":"x","schema":`+schema+`}`)
	if status != http.StatusBadRequest || !contains(errorPaths(out), "/schema") {
		t.Fatalf("status %d: %.300v", status, out)
	}
}

// TestDecodedBodyOwnsItsBytes checks what a pooled body buffer would rely
// on: the decoded body keeps copies (strings, raw members), never slices of
// the bytes it was decoded from.
func TestDecodedBodyOwnsItsBytes(t *testing.T) {
	b := []byte(`{"messages":[{"role":"user"}],"schema":{"type":"object"},"prompt":"hi"}`)
	var v sampleBody
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'x'
	}
	if len(v.Messages) != 1 || string(v.Messages[0]) != `{"role":"user"}` || string(v.Schema) != `{"type":"object"}` || v.Prompt == nil || *v.Prompt != "hi" {
		t.Errorf("the decoded body changed with the bytes it came from: %s %s %v", v.Messages, v.Schema, v.Prompt)
	}
}
