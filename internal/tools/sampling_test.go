package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/mcptest"
)

// TestWireError: every error of a sampling host reaches the server as a
// JSON-RPC error with a code (go-sdk would send a plain error with code 0).
func TestWireError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want *jsonrpc.Error
	}{
		{"refusal", &SamplingError{Code: CodeRefused, Message: "no"}, &jsonrpc.Error{Code: -1, Message: "no"}},
		{"wrapped", fmt.Errorf("host: %w", &SamplingError{Code: CodeInvalidParams, Message: "/x: bad"}), &jsonrpc.Error{Code: -32602, Message: "/x: bad"}},
		{"wire error", &jsonrpc.Error{Code: -32001, Message: "other"}, &jsonrpc.Error{Code: -32001, Message: "other"}},
		{"plain", errors.New("boom"), &jsonrpc.Error{Code: -32603, Message: "boom"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, wireError(tt.err)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestCallDepth: a server's pushed requests count as caused by the deepest
// call in flight to it; calls outside client-run loops do not count.
func TestCallDepth(t *testing.T) {
	r := &Registry{servers: map[string]*server{}, logger: slog.New(slog.DiscardHandler)}
	s := r.newServer("x", TransportStdio)
	leave0 := r.enterDepth(s, SamplingDepth(context.Background()))
	leave2 := r.enterDepth(s, SamplingDepth(WithSamplingDepth(context.Background(), 2)))
	leave1 := r.enterDepth(s, 1)
	if got := r.callDepth(s); got != 2 {
		t.Errorf("depth with calls at 0, 2 and 1 = %d, want 2", got)
	}
	leave2()
	if got := r.callDepth(s); got != 1 {
		t.Errorf("depth after the call at 2 ended = %d, want 1", got)
	}
	leave1()
	leave0()
	if got := r.callDepth(s); got != 0 || len(s.depths) != 0 {
		t.Errorf("depth with no call = %d (%v), want 0", got, s.depths)
	}
}

// TestWithRequestMeta: a stdio session's sampling request carries its
// JSON-RPC id under _meta, and the loop's members of the params move
// there unless _meta has them; the handler takes the id back out, and
// trusts it only from stdio.
func TestWithRequestMeta(t *testing.T) {
	tests := []struct {
		name, params string
		id           any
		want         string
	}{
		{"no meta", `{"maxTokens":5}`, float64(3), `{"_meta":{"io.sampled/requestId":3},"maxTokens":5}`},
		{"spoofed id", `{"_meta":{"io.sampled/requestId":"x","progressToken":1}}`, "abc", `{"_meta":{"io.sampled/requestId":"abc","progressToken":1}}`},
		{"loop members", `{"maxIterations":2,"allowedToolPatterns":["a"]}`, float64(1),
			`{"_meta":{"allowedToolPatterns":["a"],"io.sampled/requestId":1,"maxIterations":2},"allowedToolPatterns":["a"],"maxIterations":2}`},
		{"meta wins", `{"maxIterations":2,"_meta":{"maxIterations":5}}`, float64(1),
			`{"_meta":{"io.sampled/requestId":1,"maxIterations":5},"maxIterations":2}`},
	}
	for _, tt := range tests {
		got, err := withRequestMeta(json.RawMessage(tt.params), tt.id)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %s, %v; want %s", tt.name, got, err, tt.want)
		}
	}
	for _, bad := range []string{`[1]`, `{"_meta":[1]}`, `null`} {
		if _, err := withRequestMeta(json.RawMessage(bad), 1); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	meta := mcp.Meta{metaRequestID: float64(42), "progressToken": "p"}
	if got := requestID(meta, true); got != "42" {
		t.Errorf("trusted id = %q, want 42", got)
	}
	if _, ok := meta[metaRequestID]; ok {
		t.Error("the id stays in _meta")
	}
	if got := requestID(mcp.Meta{metaRequestID: "spoofed"}, false); got != "" {
		t.Errorf("untrusted id = %q, want none", got)
	}
}

// textHost answers every sampling request with one text block, counting
// the requests that reach it.
type textHost struct{ calls atomic.Int32 }

func (h *textHost) CreateMessage(context.Context, *SamplingRequest) (*sampler.CreateMessageResult, error) {
	h.calls.Add(1)
	return &sampler.CreateMessageResult{Role: sampler.RoleAssistant, Content: []sampler.Content{sampler.TextBlock("hi")},
		Model: "m", StopReason: sampler.StopEndTurn}, nil
}

// TestUndecodableParams: sampling params that go-sdk cannot decode, sent by
// a server on the official TypeScript SDK over stdio and streamable HTTP,
// get -32602 naming the JSON Pointer of the problem in sampled's words: no
// Go type or decoder text, no echo of sampled's own _meta. They never reach
// the host; params that decode do.
func TestUndecodableParams(t *testing.T) {
	t.Parallel()
	const peers = "testdata/tspeers"
	node := mcptest.NeedNode(t, peers)
	weather, err := filepath.Abs(filepath.Join(peers, "weather.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Servers: map[string]ServerOptions{
		"tsstdio": {Command: node, Args: []string{weather}},
		"tshttp":  {URL: mcptest.StartServing(t, exec.Command(node, weather, "--http"))},
	}, DisableStd: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	h := &textHost{}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := r.Start(ctx, h); err != nil {
		t.Fatal(err)
	}
	waitConnected(t, r, "tsstdio")
	waitConnected(t, r, "tshttp")

	const hi = `[{"role":"user","content":{"type":"text","text":"hi"}}]`
	tests := []struct {
		name, params string
		want         string // in the error's message; "" for a result
	}{
		{"maxTokens a string", `{"messages":` + hi + `,"maxTokens":"many"}`, "invalid params: /maxTokens: "},
		{"messages an object", `{"messages":{"role":"user"},"maxTokens":5}`, "invalid params: /messages: "},
		{"text a number", `{"messages":[{"role":"user","content":{"type":"text","text":5}}],"maxTokens":5}`, "invalid params: /messages/0/content"},
		{"unknown block type", `{"messages":[{"role":"user","content":{"type":"video"}}],"maxTokens":5}`, "invalid params: /messages/0/content"},
		{"params an array", `[1]`, "invalid params: /: "},
		{"_meta an array", `{"messages":` + hi + `,"maxTokens":5,"_meta":[1]}`, "invalid params: /_meta: "},
		{"well-formed", `{"messages":` + hi + `,"maxTokens":5}`, ""},
	}
	for _, server := range []string{"tsstdio", "tshttp"} {
		for _, tt := range tests {
			t.Run(server+"/"+tt.name, func(t *testing.T) {
				before := h.calls.Load()
				res := mustCall(t, r, server+"__raw_sample", map[string]any{"params": json.RawMessage(tt.params)})
				var out struct {
					Code    int64           `json:"code"`
					Message string          `json:"message"`
					Result  json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
					t.Fatalf("structuredContent %s: %v", res.StructuredContent, err)
				}
				reached := h.calls.Load() - before
				if tt.want == "" {
					if out.Code != 0 || out.Result == nil || reached != 1 {
						t.Errorf("%d %q, result %s, %d requests reached the host; want a result", out.Code, out.Message, out.Result, reached)
					}
					return
				}
				if out.Code != CodeInvalidParams || !strings.Contains(out.Message, tt.want) || reached != 0 {
					t.Errorf("%d %q, %d requests reached the host; want -32602 with %q", out.Code, out.Message, reached, tt.want)
				}
				for _, leak := range []string{"io.sampled", "unmarshal", "json:", "mcp.", "Go "} {
					if strings.Contains(out.Message, leak) {
						t.Errorf("the message %q holds %q", out.Message, leak)
					}
				}
			})
		}
	}
}
