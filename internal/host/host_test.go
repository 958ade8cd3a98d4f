package host_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/host"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

const weatherTool = `{"name":"get_weather","description":"Get the weather of a city.",
	"inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`

// TestServerToolsRoundTrip: a go-sdk server on each protocol version asks
// sampled to sample with its own tools, over stdio and streamable HTTP,
// pushed (2025-11-25) or as "input required" results (2026-07-28). sampled
// declares sampling with tools, answers with the model's tool_use (the
// server runs the tool), then with text once the server sends the tool's
// result; every result is valid against the official schema of the
// session's version.
func TestServerToolsRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, version, transport, mode string
	}{
		{"2025-11-25 stdio push", "", "stdio", "push"},
		{"2025-11-25 http push", tools.ProtocolVersion, "http", "push"},
		{"2026-07-28 stdio input required", tools.ProtocolVersionMRTR, "stdio", "input"},
		{"2026-07-28 http input required", tools.ProtocolVersionMRTR, "http", "input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := stdioPeer(t, tt.version, host.Policy{})
			if tt.transport == "http" {
				srv = httpPeer(t, tt.version, host.Policy{})
			}
			s := newStack(t, map[string]peerConfig{"peer": srv}, stackOptions{})

			first := fmt.Sprintf(`{"messages":[{"role":"user","content":{"type":"text","text":"What is the weather in Paris?"}}],
				"maxTokens":200,"tools":[%s]}`, weatherTool)
			out := s.sample(t, "peer", tt.mode, first)
			wantVersion := tt.version
			if wantVersion == "" {
				wantVersion = tools.ProtocolVersion
			}
			if out.ProtocolVersion != wantVersion {
				t.Errorf("negotiated protocol version %q, want %q", out.ProtocolVersion, wantVersion)
			}
			if tt.version != tools.ProtocolVersionMRTR && string(out.Sampling) != `{"tools":{}}` {
				t.Errorf("declared sampling capability %s, want {\"tools\":{}}", out.Sampling)
			}
			res := checkResult(t, out)
			if res.StopReason != sampler.StopToolUse || len(res.Content) != 1 || res.Content[0].Type != sampler.BlockToolUse ||
				res.Content[0].Name != "get_weather" || res.Model != "default" {
				t.Fatalf("first answer %s, want one get_weather tool_use by the default model", out.Result)
			}
			var args struct{ City string }
			if err := json.Unmarshal(res.Content[0].Input, &args); err != nil || args.City == "" {
				t.Errorf("tool_use input %s does not fit the tool's schema", res.Content[0].Input)
			}

			// The server ran its tool and sends its result.
			use, _ := json.Marshal(res.Content[0])
			second := fmt.Sprintf(`{"messages":[
				{"role":"user","content":{"type":"text","text":"What is the weather in Paris?"}},
				{"role":"assistant","content":[%s]},
				{"role":"user","content":[{"type":"tool_result","toolUseId":%q,"content":[{"type":"text","text":"Sunny, 21 C"}]}]}],
				"maxTokens":200,"tools":[%s]}`, use, res.Content[0].ID, weatherTool)
			res = checkResult(t, s.sample(t, "peer", tt.mode, second))
			if res.StopReason != sampler.StopEndTurn || len(res.Content) != 1 || res.Content[0].Type != sampler.BlockText ||
				!strings.Contains(res.Content[0].Text, "Sunny") {
				t.Errorf("final answer %+v, want one text block quoting the tool's result", res)
			}
			if got := testutil.ToFloat64(s.metrics.MCPSampling.WithLabelValues("peer", "ok")); got != 2 {
				t.Errorf("sampling requests {peer, ok} = %v, want 2", got)
			}
		})
	}
}

// TestPlainResultIsOneBlock: without tools the result's content is one
// block, valid against the schema.
func TestPlainResultIsOneBlock(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]peerConfig{"peer": stdioPeer(t, "", host.Policy{})}, stackOptions{})
	out := s.sample(t, "peer", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello"}}],"maxTokens":50,"_meta":{"progressToken":7}}`)
	res := checkResult(t, out)
	if diff := cmp.Diff([]string{"sampling with offline/default"}, s.progressSeen(t, "peer", "7")); diff != "" {
		t.Errorf("progress the server saw (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(strings.TrimSpace(string(out.Result)), "{") {
		t.Fatal("unreachable: the result is an object")
	}
	var wire struct{ Content json.RawMessage }
	if err := json.Unmarshal(out.Result, &wire); err != nil || !strings.HasPrefix(string(wire.Content), "{") {
		t.Errorf("content %s, want one block (an object)", wire.Content)
	}
	if res.Role != sampler.RoleAssistant || len(res.Content) != 1 || res.Content[0].Type != sampler.BlockText {
		t.Errorf("result %s", out.Result)
	}
}

// TestPolicy: each rule of a server's sampling policy, with the JSON-RPC
// error the server sees.
func TestPolicy(t *testing.T) {
	t.Parallel()
	hello := `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello to the whole wide world"}}],"maxTokens":500}`
	s := newStack(t, map[string]peerConfig{
		"off":     stdioPeer(t, "", host.Policy{Disabled: true}),
		"flaky":   stdioPeer(t, "", host.Policy{Models: []string{"offline/flaky"}, MaxTokens: 3}),
		"limited": stdioPeer(t, "", host.Policy{RequestsPerMinute: 1}),
	}, stackOptions{})

	out := s.sample(t, "off", "push", hello)
	if out.Code != tools.CodeRefused || !strings.Contains(out.Message, "sampling is disabled for MCP server \"off\"") {
		t.Errorf("disabled: %d %q, want -1 saying sampling is disabled", out.Code, out.Message)
	}

	// The hint names the default model, which the policy does not allow:
	// its model is used, and maxTokens is capped.
	out = s.sample(t, "flaky", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello to the whole wide world"}}],
		"maxTokens":500,"modelPreferences":{"hints":[{"name":"default"}]}}`)
	res := checkResult(t, out)
	if res.Model != "flaky" {
		t.Errorf("model %q, want flaky (the policy's)", res.Model)
	}
	if n := len(strings.Fields(res.Content[0].Text)); n > 3 {
		t.Errorf("answer %q has %d words, more than the cap of 3 tokens", res.Content[0].Text, n)
	}

	if out := s.sample(t, "limited", "push", hello); out.Code != 0 {
		t.Fatalf("first request: %d %s", out.Code, out.Message)
	}
	out = s.sample(t, "limited", "push", hello)
	if out.Code != tools.CodeRefused || !strings.Contains(out.Message, "1 sampling requests per minute") {
		t.Errorf("second request in a minute: %d %q, want -1 naming the rate", out.Code, out.Message)
	}

	out = s.sample(t, "limited", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5,
		"_meta":{"maxIterations":2,"allowedToolPatterns":["std__*"]}}`)
	if out.Code != tools.CodeRefused {
		t.Errorf("loop, refused by the rate: %d %q", out.Code, out.Message)
	}
	want := map[string]float64{"off": 1, "flaky": 0, "limited": 2}
	got := map[string]float64{}
	for name := range want {
		got[name] = testutil.ToFloat64(s.metrics.MCPSampling.WithLabelValues(name, "refused"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused requests by server (-want +got):\n%s", diff)
	}
}

// TestInvalidParams: params sampled cannot use are -32602 with the JSON
// Pointer path of the problem.
func TestInvalidParams(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]peerConfig{"peer": stdioPeer(t, "", host.Policy{Loop: true, LoopTools: tools.Patterns{"std__*"}})}, stackOptions{})
	tests := []struct{ name, params, want string }{
		{"image without data", `{"messages":[{"role":"user","content":{"type":"image","mimeType":"image/png"}}],"maxTokens":5}`, "/messages/0/content"},
		{"bad maxIterations", `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5,"_meta":{"maxIterations":0,"allowedToolPatterns":["std__*"]}}`, "/_meta/maxIterations"},
		{"patterns alone", `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5,"_meta":{"allowedToolPatterns":["std__*"]}}`, "/_meta/maxIterations: required"},
		{"bad pattern", `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5,"_meta":{"maxIterations":2,"allowedToolPatterns":["std__["]}}`, "/_meta/allowedToolPatterns/0"},
		{"loop and tools", fmt.Sprintf(`{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5,"tools":[%s],"_meta":{"maxIterations":2,"allowedToolPatterns":["std__*"]}}`, weatherTool), "/tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := s.sample(t, "peer", "push", tt.params)
			if out.Code != tools.CodeInvalidParams || !strings.Contains(out.Message, tt.want) {
				t.Errorf("%d %q, want -32602 naming %s", out.Code, out.Message, tt.want)
			}
		})
	}
}

// TestRetryProgress: a request whose answer needs a corrective retry reports
// the retry as progress, after the start of the sampling.
func TestRetryProgress(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]peerConfig{"peer": stdioPeer(t, "", host.Policy{Models: []string{"offline/flaky"}})}, stackOptions{})
	out := s.sample(t, "peer", "push", `{"messages":[{"role":"user","content":{"type":"text","text":"Weather in Paris?"}}],"maxTokens":200,
		"tools":[{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
		"toolChoice":{"mode":"required"},"_meta":{"progressToken":"r1"}}`)
	checkResult(t, out)
	seen := s.progressSeen(t, "peer", "r1")
	if len(seen) != 2 || seen[0] != "sampling with offline/flaky" || !strings.HasPrefix(seen[1], "corrective retry: attempt 2 (/toolCalls") {
		t.Errorf("progress the server saw: %q; want the start, then the retry naming what it corrects", seen)
	}
}
