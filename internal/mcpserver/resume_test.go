package mcpserver_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// sseEvent is one event of a stream: its id and data.
type sseEvent struct{ id, data string }

// readEvents reads the events of an SSE body until it ends.
func readEvents(t *testing.T, body io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// mcpRequest sends one JSON-RPC message over raw HTTP.
func mcpRequest(t *testing.T, method, url, session, lastEventID, body string) *http.Response {
	t.Helper()
	return mcpRequestAs(t, "", method, url, session, lastEventID, body)
}

// mcpRequestAs sends one JSON-RPC message over raw HTTP with an API key
// ("" for none).
func mcpRequestAs(t *testing.T, key, method, url, session, lastEventID, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestResumeAStream: the events of a tool call's stream carry ids, and a
// GET with Last-Event-ID replays what came after that id (the client lost
// its connection): here the progress notifications and the result of
// agent_delegate after its first progress notification.
func TestResumeAStream(t *testing.T) {
	s := start(t, map[string]string{}, "")
	resp := mcpRequest(t, http.MethodPost, s.url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	_ = readEvents(t, resp.Body)
	resp.Body.Close()
	if session == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	resp = mcpRequest(t, http.MethodPost, s.url, session, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()

	resp = mcpRequest(t, http.MethodPost, s.url, session, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_delegate","arguments":{"goal":"calculate 6*7"},"_meta":{"progressToken":"t"}}}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	var ids []string
	for _, e := range events {
		ids = append(ids, e.id)
	}
	if len(events) < 3 || !strings.Contains(events[0].data, `"notifications/progress"`) || !strings.Contains(events[len(events)-1].data, `"id":2`) {
		t.Fatalf("events %+v: want progress notifications, then the result", events)
	}
	resp = mcpRequest(t, http.MethodGet, s.url, session, events[0].id, "")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with Last-Event-ID %s: %d", events[0].id, resp.StatusCode)
	}
	replayed := readEvents(t, resp.Body)
	if len(replayed) != len(events)-1 {
		t.Fatalf("replayed %d events after %s, want %d (ids %v)", len(replayed), events[0].id, len(events)-1, ids)
	}
	for i, e := range replayed {
		if e != events[i+1] {
			t.Errorf("replayed event %d = %+v, want %+v", i, e, events[i+1])
		}
	}
}
