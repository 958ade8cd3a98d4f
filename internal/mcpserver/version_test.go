package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
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

// TestNegotiatedVersions: the revisions README lists are negotiated as
// asked; another is answered with 2025-11-25 (the lifecycle's answer to a
// version the server does not speak), and a request whose
// Mcp-Protocol-Version header names one is refused with a JSON-RPC error.
func TestNegotiatedVersions(t *testing.T) {
	s := start(t, map[string]string{}, "")
	for _, tt := range []struct{ ask, want string }{
		{"2024-11-05", "2024-11-05"}, {"2025-03-26", "2025-03-26"}, {"2025-06-18", "2025-06-18"}, {"2025-11-25", "2025-11-25"},
		{"2024-10-07", "2025-11-25"},
	} {
		t.Run(tt.ask, func(t *testing.T) {
			resp := mcpRequest(t, http.MethodPost, s.url, "", "", strings.Replace(initialize, "2025-11-25", tt.ask, 1))
			events := readEvents(t, resp.Body)
			resp.Body.Close()
			if len(events) != 1 || !strings.Contains(events[0].data, `"protocolVersion":"`+tt.want+`"`) {
				t.Fatalf("initialize asking for %s: %+v, want %s", tt.ask, events, tt.want)
			}
			if tt.ask == tt.want {
				return
			}
			req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"))
			req.Header.Set("Mcp-Protocol-Version", tt.ask)
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got rpcError
			if err := json.NewDecoder(resp.Body).Decode(&got); resp.StatusCode != http.StatusBadRequest || err != nil || got.Error.Code != -32600 {
				t.Errorf("a request at %s: %d %+v (%v), want 400 and a JSON-RPC error -32600", tt.ask, resp.StatusCode, got, err)
			}
		})
	}
}
