package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// initialize is a raw initialize request at protocol version 2025-11-25.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// openSession opens a session over raw HTTP with a key ("" for none) and
// returns its id.
func openSession(t *testing.T, key, url string) string {
	t.Helper()
	resp := mcpRequestAs(t, key, http.MethodPost, url, "", "", initialize)
	session := resp.Header.Get("Mcp-Session-Id")
	_ = readEvents(t, resp.Body)
	resp.Body.Close()
	if session == "" {
		t.Fatalf("initialize: %d, no Mcp-Session-Id", resp.StatusCode)
	}
	resp = mcpRequestAs(t, key, http.MethodPost, url, session, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	return session
}

// TestSessionBelongsToItsKey: a session belongs to the key that opened it.
// Another key sending its Mcp-Session-Id cannot read its stream (a GET
// with Last-Event-ID replays the owner's results), call a tool on it or
// end it: it gets the 404 of a session that does not exist, as it gets
// for another key's run. The owner's session works on.
func TestSessionBelongsToItsKey(t *testing.T) {
	s := start(t, map[string]string{}, keyed())
	session := openSession(t, aliceKey, s.url)
	resp := mcpRequestAs(t, aliceKey, http.MethodPost, s.url, session, "",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_delegate","arguments":{"goal":"calculate 6*7"},"_meta":{"progressToken":"t"}}}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) < 2 {
		t.Fatalf("events %+v: want progress notifications, then the result", events)
	}
	notFound := func(t *testing.T, key, method, session, lastEventID, body string) string {
		t.Helper()
		resp := mcpRequestAs(t, key, method, s.url, session, lastEventID, body)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s as %s: %d %s, want 404", method, key, resp.StatusCode, b)
		}
		return string(b)
	}
	const call = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"agent_summarize","arguments":{"text":"bob's"}}}`
	for _, tt := range []struct{ name, method, lastEventID, body string }{
		{"read the stream", http.MethodGet, events[0].id, ""},
		{"call a tool", http.MethodPost, "", call},
		{"end the session", http.MethodDelete, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := notFound(t, bobKey, tt.method, session, tt.lastEventID, tt.body)
			if want := notFound(t, bobKey, tt.method, "no-such-session", tt.lastEventID, tt.body); got != want {
				t.Errorf("bob on alice's session: %q; on no session: %q; want the same", got, want)
			}
		})
	}
	resp = mcpRequestAs(t, aliceKey, http.MethodGet, s.url, session, events[0].id, "")
	defer resp.Body.Close()
	if replayed := readEvents(t, resp.Body); resp.StatusCode != http.StatusOK || len(replayed) != len(events)-1 {
		t.Errorf("alice's GET with Last-Event-ID: %d, %d events; want 200, %d", resp.StatusCode, len(replayed), len(events)-1)
	}
}

// TestSessionRefusesAnotherKey: with go-sdk's client, a session bob opened
// does not take alice's calls: they fail as on a session that ended, and
// start no loop for either key.
func TestSessionRefusesAnotherKey(t *testing.T) {
	s := start(t, map[string]string{}, keyed())
	b := newBearer(bobKey)
	cs := connectAs(t, s.url, b)
	b.key.Store(aliceKey)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_delegate", Arguments: map[string]any{"goal": "say hello", "maxIterations": 1}})
	if err == nil || !strings.Contains(err.Error(), "session not found") {
		t.Errorf("alice's call on bob's session: %v, want the session not found", err)
	}
	for _, key := range []string{aliceKey, bobKey} {
		if runs := s.listed(t, key); len(runs) != 0 {
			t.Errorf("runs of %s: %v, want none", key, runs)
		}
	}
}
