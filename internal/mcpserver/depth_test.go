package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/testing/testwait"
	"github.com/sampled/sampled/internal/tools"
)

// TestDelegateDepth: a tools/call of agent_delegate says its depth in
// _meta; the run's origin records it, and a call deeper than the limit of
// nested sampling starts no loop.
func TestDelegateDepth(t *testing.T) {
	s := start(t, map[string]string{}, "")
	cs := connect(t, s.url, nil)
	for _, tt := range []struct {
		name  string
		meta  mcp.Meta
		depth any // the run's origin's; nil: none
	}{
		{"outside any loop", nil, nil},
		{"at the limit", mcp.Meta{tools.MetaDepth: tools.MaxDepth}, float64(tools.MaxDepth)},
		{"too deep", mcp.Meta{tools.MetaDepth: tools.MaxDepth + 1}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: tt.meta, Name: "agent_delegate",
				Arguments: map[string]any{"goal": "calculate 6*7", "maxIterations": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "too deep" {
				want := fmt.Sprintf("nested too deep: this call is at depth %d, the limit is %d", tools.MaxDepth+1, tools.MaxDepth)
				if !res.IsError || !strings.Contains(text(res), want) {
					t.Errorf("isError %v %q, want a refusal saying %q", res.IsError, text(res), want)
				}
				return
			}
			origin, _ := s.loopSnapshot(t, structured(t, res)["runId"].(string))["origin"].(map[string]any)
			if origin["depth"] != tt.depth {
				t.Errorf("the run's origin %v, want depth %v", origin, tt.depth)
			}
		})
	}
}

// delegatingUpstream is an Ollama upstream whose model calls
// self__agent_delegate whenever it has that tool, and answers in text once
// a tool's result came back.
func delegatingUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role string }
			Tools    []struct{ Function struct{ Name string } }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		msg := map[string]any{"role": "assistant", "content": "done"}
		if req.Messages[len(req.Messages)-1].Role != "tool" && slices.ContainsFunc(req.Tools, func(t struct{ Function struct{ Name string } }) bool {
			return t.Function.Name == "self__agent_delegate"
		}) {
			msg = map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
				map[string]any{"function": map[string]any{"name": "self__agent_delegate", "arguments": map[string]any{"goal": "delegate again"}}}}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"model": "m", "message": msg, "done": true, "done_reason": "stop"})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// startSelf serves sampled configured (file, with %[1]s the URL of its own
// /mcp) as an MCP server of itself, with sampled's providers (those of
// delegatingUpstream) answering /mcp's tools, and waits until it is
// connected to itself.
func startSelf(t *testing.T, file string) *sampled {
	t.Helper()
	env := map[string]string{"SAMPLED_CONFIG": "sampled.yaml", "SAMPLING_PROVIDER": "ollama", "SAMPLING_ENDPOINT": delegatingUpstream(t)}
	srv := httptest.NewUnstartedServer(nil)
	file = fmt.Sprintf("mcpServer: {sampling: service}\n"+file, "http://"+srv.Listener.Addr().String()+"/mcp")
	cfg, err := config.Load(func(k string) string { return env[k] }, func(string) ([]byte, error) { return []byte(file), nil })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, err := app.New(context.Background(), app.Options{Config: cfg, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = a.Handler
	srv.Start()
	t.Cleanup(func() {
		a.Drain()
		srv.Close()
		_ = a.Close()
	})
	s := &sampled{url: srv.URL + "/mcp", srv: srv, app: a, reg: reg}
	testwait.Poll(t, 10*time.Millisecond, testwait.Timeout, "sampled connected to itself", func() bool {
		resp, body := s.send(t, aliceKey, http.MethodGet, "/v1/tools", "")
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"self__agent_delegate"`)
	})
	return s
}

// TestDelegateThroughItself: with sampled an MCP server of itself, a loop
// whose model calls agent_delegate through /mcp, whose loop calls it
// again, and so on, is bounded: by the depth limit of nested sampling,
// and with keys by the loops of the key that started the outermost loop,
// which every nested loop belongs to and counts against, whatever key
// sampled calls itself with.
func TestDelegateThroughItself(t *testing.T) {
	keys := fmt.Sprintf("apiKeys:\n  - {name: alice, hash: %s, concurrentLoops: 2}\n  - {name: self, hash: %s}\n",
		access.HashKey(aliceKey), access.HashKey("self-key"))
	for _, tt := range []struct {
		name, file string
		runs       int // alice's runs, the outermost among them
	}{
		{"depth", "mcpServers:\n  self: {url: '%[1]s'}\n", 1 + tools.MaxDepth},
		{"the key's loops", "mcpServers:\n  self: {url: '%[1]s', headers: {Authorization: Bearer self-key}}\n" + keys, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startSelf(t, tt.file)
			resp, body := s.send(t, aliceKey, http.MethodPost, "/v1/loops", `{"prompt":"delegate","maxIterations":2}`)
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST /v1/loops = %d %s", resp.StatusCode, body)
			}
			var started struct{ ID string }
			if err := json.Unmarshal(body, &started); err != nil {
				t.Fatal(err)
			}
			testwait.Poll(t, 10*time.Millisecond, testwait.Timeout, "the outermost loop's end", func() bool {
				_, body := s.send(t, aliceKey, http.MethodGet, "/v1/loops/"+started.ID, "")
				return !strings.Contains(string(body), `"status":"running"`)
			})
			runs := s.listed(t, aliceKey)
			if len(runs) != tt.runs {
				t.Errorf("alice's runs %v, want %d", runs, tt.runs)
			}
			if tt.name == "the key's loops" {
				for id, owner := range runs {
					if owner != "alice" {
						t.Errorf("run %s belongs to %q, want alice", id, owner)
					}
				}
				if runs := s.listed(t, "self-key"); len(runs) != 0 {
					t.Errorf("runs of the key sampled calls itself with: %v, want none", runs)
				}
			}
		})
	}
}
