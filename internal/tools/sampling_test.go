package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
