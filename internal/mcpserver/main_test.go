package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/sampler"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// sampled is a test-started sampled: the assembled service on a loopback
// listener.
type sampled struct {
	url string // of /mcp
	srv *httptest.Server
	app *app.App
	reg *prometheus.Registry
}

// start serves sampled configured by env (config.Load's variables) and
// optionally a YAML file.
func start(t *testing.T, env map[string]string, file string) *sampled {
	t.Helper()
	if file != "" {
		env["SAMPLED_CONFIG"] = "sampled.yaml"
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, func(string) ([]byte, error) { return []byte(file), nil })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, err := app.New(context.Background(), app.Options{Config: cfg, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		a.Drain()
		srv.Close()
		_ = a.Close()
	})
	return &sampled{url: srv.URL + "/mcp", srv: srv, app: a, reg: reg}
}

// connect opens a go-sdk client session to /mcp.
func connect(t *testing.T, url string, o *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "1"}, o)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and fails t on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// structured returns a successful result's structuredContent, checking
// that the text content holds the same JSON.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("isError: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("content text is not the JSON of the result: %v", err)
	}
	return out
}

// text returns the text of a result's first content block.
func text(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// validate checks v against a JSON Schema with the domain's validator.
func validate(t *testing.T, schema any, v any) {
	t.Helper()
	sb, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sampler.NewSchemaCache(0).Compile(sb, "/")
	if err != nil {
		t.Fatalf("schema %s: %v", sb, err)
	}
	if errs := s.Validate(vb); errs != nil {
		t.Errorf("%s does not validate against %s: %v", vb, sb, errs)
	}
}

// post sends a raw JSON-RPC initialize to /mcp with extra headers and
// returns the status.
func post(t *testing.T, url string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// toolCalls reads sampled_mcp_tool_calls_total for one series.
func (s *sampled) toolCalls(t *testing.T, tool, by, outcome string) float64 {
	t.Helper()
	return s.metric(t, "sampled_mcp_tool_calls_total", map[string]string{"tool": tool, "sampler": by, "outcome": outcome})
}

// metric reads the counter of the series with these labels (0 if absent).
func (s *sampled) metric(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// pollEvery is the interval of polls for what only a poll can see.
const pollEvery = 5 * time.Millisecond
