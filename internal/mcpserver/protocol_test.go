package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rpcError is a JSON-RPC error response, its id as JSON.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code int `json:"code"`
	} `json:"error"`
}

// TestProtocolErrors: /mcp answers protocol errors as JSON-RPC errors with
// JSON bodies and the codes JSON-RPC gives them, and ignores a
// notification it does not know.
func TestProtocolErrors(t *testing.T) {
	s := start(t, map[string]string{}, "")
	session := openSession(t, "", s.url)
	tests := []struct {
		name, method, session, body string
		status                      int
		want                        *rpcError // nil: no body
	}{
		{"unknown method", http.MethodPost, session, `{"jsonrpc":"2.0","id":5,"method":"tools/destroy","params":{}}`,
			http.StatusOK, &rpcError{JSONRPC: "2.0", ID: json.RawMessage(`5`)}},
		{"unknown notification", http.MethodPost, session, `{"jsonrpc":"2.0","method":"notifications/whatever"}`, http.StatusAccepted, nil},
		{"no session", http.MethodPost, "", `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`,
			http.StatusBadRequest, &rpcError{JSONRPC: "2.0", ID: json.RawMessage(`"a"`)}},
		{"malformed JSON", http.MethodPost, session, `{"jsonrpc":"2.0","id":1,`,
			http.StatusBadRequest, &rpcError{JSONRPC: "2.0"}},
		{"neither request nor response", http.MethodPost, session, `{"jsonrpc":"2.0","id":9}`,
			http.StatusBadRequest, &rpcError{JSONRPC: "2.0", ID: json.RawMessage(`9`)}},
		{"not JSON-RPC 2.0", http.MethodPost, session, `{"jsonrpc":"1.0","id":1,"method":"ping"}`,
			http.StatusBadRequest, &rpcError{JSONRPC: "2.0", ID: json.RawMessage(`1`)}},
		{"null id", http.MethodPost, session, `{"jsonrpc":"2.0","id":null,"method":"ping"}`,
			http.StatusBadRequest, &rpcError{JSONRPC: "2.0"}},
		{"a batch", http.MethodPost, session, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
			http.StatusBadRequest, &rpcError{JSONRPC: "2.0"}},
		{"a notification with an id", http.MethodPost, session, `{"jsonrpc":"2.0","id":3,"method":"notifications/initialized"}`,
			http.StatusBadRequest, &rpcError{JSONRPC: "2.0", ID: json.RawMessage(`3`)}},
		{"a GET without session", http.MethodGet, "", "", http.StatusBadRequest, &rpcError{JSONRPC: "2.0"}},
	}
	codes := map[string]int{"unknown method": -32601, "no session": -32000, "malformed JSON": -32700, "a GET without session": -32600}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := mcpRequest(t, tt.method, s.url, tt.session, "", tt.body)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d (body %s)", resp.StatusCode, tt.status, b)
			}
			if tt.want == nil {
				if len(b) != 0 {
					t.Errorf("body %s, want none", b)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json (body %s)", ct, b)
			}
			var got rpcError
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("body %s: %v", b, err)
			}
			want := *tt.want
			if want.Error.Code = codes[tt.name]; want.Error.Code == 0 {
				want.Error.Code = -32600
			}
			if want.ID == nil {
				want.ID = json.RawMessage(`null`)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error response (-want +got):\n%s\nbody %s", diff, b)
			}
		})
	}
	// The session still serves known methods.
	resp := mcpRequest(t, http.MethodPost, s.url, session, "", `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	defer resp.Body.Close()
	if events := readEvents(t, resp.Body); len(events) != 1 || events[0].data != `{"jsonrpc":"2.0","id":7,"result":{}}` {
		t.Errorf("ping: %+v", events)
	}
}

// TestPrimingEvent: the event that starts a stream (MCP's priming event,
// an id and empty data) carries a retry field: how long a client that lost
// the stream waits before resuming it.
func TestPrimingEvent(t *testing.T) {
	s := start(t, map[string]string{}, "")
	resp := mcpRequest(t, http.MethodPost, s.url, "", "", initialize)
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "" {
		lines = append(lines, sc.Text())
	}
	first := slices.Sorted(slices.Values(lines)) // an event's fields come in any order
	if len(first) != 4 || first[0] != "data: " || first[1] != "event: prime" || !strings.HasPrefix(first[2], "id: ") || first[3] != "retry: 1000" {
		t.Errorf("first event %q, want event prime, an id, retry 1000 and empty data", lines)
	}
}
