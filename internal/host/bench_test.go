package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sampled/sampled/internal/host"
)

// BenchmarkStdioRoundTrip measures what a server-initiated sampling
// round-trip adds to a tool call over stdio. "call" is a tool call of the
// go-sdk peer that does not sample; "sampling" one whose tool asks sampled
// to sample (sampling/createMessage pushed back over the same pipe,
// answered by the host with the offline model); "sampling_tools" the same
// with one server tool in the request (the answer is a tool_use). The
// added latency is sampling minus call.
func BenchmarkStdioRoundTrip(b *testing.B) {
	s := newStack(b, map[string]peerConfig{"peer": stdioPeer(b, "", host.Policy{})}, stackOptions{})
	plain := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"Name three rivers in France"}}],"maxTokens":100}`)
	tools := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"What is the weather in Paris?"}}],"maxTokens":100,"tools":[` + weatherTool + `]}`)
	cases := []struct {
		name, tool string
		args       any
	}{
		{"call", "peer__progress_seen", map[string]string{"token": "none"}},
		{"sampling", "peer__sample", map[string]any{"params": plain}},
		{"sampling_tools", "peer__sample", map[string]any{"params": tools}},
	}
	ctx := context.Background()
	for _, c := range cases {
		args, err := json.Marshal(c.args)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.reg.Call(ctx, c.tool, args)
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %+v", c.tool, err, res)
				}
			}
		})
	}
}
