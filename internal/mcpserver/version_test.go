package mcpserver_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProtocolVersions: a client on each protocol revision go-sdk speaks
// connects, negotiates and calls a tool that it samples for. /mcp keeps
// sessions (server-initiated sampling needs them), and go-sdk v1.8.0 serves
// 2026-07-28 only without sessions, so a client asking for 2026-07-28
// learns so from server/discover and falls back to initialize at
// 2025-11-25.
func TestProtocolVersions(t *testing.T) {
	s := start(t, map[string]string{}, "")
	for _, tt := range []struct{ ask, want string }{
		{"2025-06-18", "2025-06-18"}, {"2025-11-25", "2025-11-25"}, {"2026-07-28", "2025-11-25"},
	} {
		t.Run(tt.ask, func(t *testing.T) {
			sc := newSamplingClient(`{"choice":"yes","reasoning":"client","confidence":1}`)
			c := mcp.NewClient(&mcp.Implementation{Name: "version-test", Version: "1"}, sc.options())
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url}, &mcp.ClientSessionOptions{ProtocolVersion: tt.ask})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tt.want {
				t.Errorf("negotiated %s, want %s", got, tt.want)
			}
			out := structured(t, callTool(t, cs, "agent_decide", map[string]any{"question": "q"}))
			if sc.count() != 1 || out["reasoning"] != "client" {
				t.Errorf("%d sampling requests, answer %v; want the client's", sc.count(), out)
			}
		})
	}
}
