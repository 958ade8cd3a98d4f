package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// bearer is an http.RoundTripper that sends the key it holds at the time
// of each request.
type bearer struct{ key atomic.Value }

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key.Load().(string))
	return http.DefaultTransport.RoundTrip(r)
}

// connectAs opens a go-sdk client session to /mcp whose requests carry
// the key b holds.
func connectAs(t *testing.T, url string, b *bearer) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: b}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func newBearer(key string) *bearer {
	b := &bearer{}
	b.key.Store(key)
	return b
}

// keyedConfig configures two API keys: alice, who may run one loop at
// once, and bob.
const (
	aliceKey    = "alice-secret-key"
	bobKey      = "bob-secret-key"
	keyedConfig = "apiKeys:\n  - name: alice\n    hash: %s\n    concurrentLoops: 1\n  - name: bob\n    hash: %s\n"
)

func keyed() string {
	return fmt.Sprintf(keyedConfig, access.HashKey(aliceKey), access.HashKey(bobKey))
}

// send sends a request to sampled's REST API with a key and returns the
// response and its body.
func (s *sampled) send(t *testing.T, key, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// listed returns the ids and owners of the runs GET /v1/loops lists for a
// key.
func (s *sampled) listed(t *testing.T, key string) map[string]string {
	t.Helper()
	resp, body := s.send(t, key, http.MethodGet, "/v1/loops", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/loops = %d %s", resp.StatusCode, body)
	}
	var page struct {
		Loops []struct{ ID, Owner string }
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("GET /v1/loops: %v in %s", err, body)
	}
	out := map[string]string{}
	for _, l := range page.Loops {
		out[l.ID] = l.Owner
	}
	return out
}

// TestDelegateLoopsBelongToTheKey: a loop that agent_delegate starts
// belongs to the key of the call and counts against its concurrent loops:
// while it runs, that key's POST /v1/loops gets a 429 and its second
// agent_delegate a refusal that says when to retry; GET /v1/loops lists it
// for that key alone, another key gets 404 for it; once it has ended the
// key may start a loop again.
func TestDelegateLoopsBelongToTheKey(t *testing.T) {
	upstream, asked, _ := stallingUpstream(t)
	s := start(t, map[string]string{"SAMPLING_PROVIDER": "ollama", "SAMPLING_ENDPOINT": upstream}, keyed())
	alice := connectAs(t, s.url, newBearer(aliceKey))

	type result struct {
		res *mcp.CallToolResult
		err error
	}
	first := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a test that failed before the loop's end ends it
	go func() {
		res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "agent_delegate", Arguments: map[string]any{"goal": "Wait"}})
		first <- result{res, err}
	}()
	testwait.Recv(t, asked, "the delegated loop's model call")

	runs := s.listed(t, aliceKey)
	if len(runs) != 1 {
		t.Fatalf("alice's runs %v, want the delegated loop alone", runs)
	}
	var id string
	for k := range runs {
		id = k
	}
	if diff := cmp.Diff(map[string]string{id: "alice"}, runs); diff != "" {
		t.Errorf("alice's runs (-want +got):\n%s", diff)
	}
	if runs := s.listed(t, bobKey); len(runs) != 0 {
		t.Errorf("bob's runs %v, want none", runs)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if resp, body := s.send(t, bobKey, method, "/v1/loops/"+id, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s alice's run as bob = %d %s, want 404", method, resp.StatusCode, body)
		}
	}

	const loop = `{"prompt":"hi"}`
	resp, body := s.send(t, aliceKey, http.MethodPost, "/v1/loops", loop)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" || !strings.Contains(string(body), `"limit":"loops"`) {
		t.Errorf("alice's POST /v1/loops while her delegated loop runs = %d (Retry-After %q) %s; want 429, limit loops",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	res := callTool(t, alice, "agent_delegate", map[string]any{"goal": "Wait too"})
	if want := "the loop was not started: this API key has as many loops running as it may (its loop limit is reached); retry after 5s"; !res.IsError || text(res) != want {
		t.Errorf("alice's second agent_delegate = isError %v %q, want isError %q", res.IsError, text(res), want)
	}
	if got := s.metric(t, "sampled_rate_limited_total", map[string]string{"key": "alice", "limit": "loops"}); got != 2 {
		t.Errorf("alice's loops refused %v, want 2 (POST /v1/loops and agent_delegate)", got)
	}
	if got := s.toolCalls(t, "agent_delegate", "service", "refused"); got != 1 {
		t.Errorf("agent_delegate calls refused %v, want 1", got)
	}

	if resp, body := s.send(t, aliceKey, http.MethodDelete, "/v1/loops/"+id, ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE her run as alice = %d %s", resp.StatusCode, body)
	}
	r := testwait.Recv(t, first, "the delegated loop's end")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if out := structured(t, r.res); out["runId"] != id || out["stopReason"] != "cancelled" {
		t.Errorf("first agent_delegate %v, want run %s cancelled", out, id)
	}
	// The run has ended: its slot is free once the engine has released it.
	testwait.Poll(t, pollEvery, testwait.Timeout, "alice's loop slot freed", func() bool {
		resp, _ := s.send(t, aliceKey, http.MethodPost, "/v1/loops", loop)
		return resp.StatusCode == http.StatusCreated
	})
}
