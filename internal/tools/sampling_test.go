package tools

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	r := &Registry{}
	s := newServer("x")
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
