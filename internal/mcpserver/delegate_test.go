package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/testing/testwait"
)

// loopSnapshot reads GET /v1/loops/{id}.
func (s *sampled) loopSnapshot(t *testing.T, id string) map[string]any {
	t.Helper()
	resp, err := http.Get(s.srv.URL + "/v1/loops/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/loops/%s = %d", id, resp.StatusCode)
	}
	var snap map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestDelegateRunsALoop: sampled runs the loop over the tools the patterns
// allow, reports each iteration as progress, and the run is visible at
// /v1/loops/{runId}.
func TestDelegateRunsALoop(t *testing.T) {
	s := start(t, map[string]string{}, "")
	progress := make(chan *mcp.ProgressNotificationParams, 16) // more than maxIterations
	cs := connect(t, s.url, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress <- r.Params
	}})
	params := &mcp.CallToolParams{Name: "agent_delegate", Arguments: map[string]any{"goal": "calculate 6*7", "allowedTools": []string{"std__calc*"}}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	out := structured(t, res)
	if out["success"] != true || out["stopReason"] != "completed" || out["result"] == "" {
		t.Fatalf("result %v, want a completed loop", out)
	}
	calls, _ := out["toolCalls"].([]any)
	if len(calls) == 0 {
		t.Fatalf("no tool calls in %v", out)
	}
	for _, c := range calls {
		if name := c.(map[string]any)["name"]; name != "std__calculate" {
			t.Errorf("tool call %v: only std__calculate is allowed", name)
		}
	}
	iterations := int(out["iterations"].(float64))
	snap := s.loopSnapshot(t, out["runId"].(string))
	tools, _ := json.Marshal(snap["tools"])
	if snap["status"] != "completed" || string(tools) != `["std__calculate"]` || int(snap["iterations"].(float64)) != iterations || snap["maxIterations"] != 5.0 {
		t.Errorf("run %v, want completed with the allowed tool alone, %d iterations of at most 5", snap, iterations)
	}
	// The server sends each notification before the result, but the client
	// hands notifications to their handler from a queue of its own, in
	// order, so the last ones can reach it after CallTool has returned.
	for i := range iterations {
		p := testwait.Recv(t, progress, fmt.Sprintf("progress notification %d of %d", i+1, iterations))
		if p.Progress != float64(i+1) || p.Total != 5 || !strings.HasPrefix(p.Message, "iteration ") {
			t.Errorf("progress %d: %+v", i, p)
		}
	}
	select {
	case p := <-progress:
		t.Errorf("more progress notifications than the %d iterations: %+v", iterations, p)
	default:
	}
}

func TestDelegateIterationLimit(t *testing.T) {
	s := start(t, map[string]string{}, "")
	cs := connect(t, s.url, nil)
	out := structured(t, callTool(t, cs, "agent_delegate", map[string]any{"goal": "calculate 6*7", "maxIterations": 1}))
	// The last allowed iteration offers no tools: the model answers.
	if out["iterations"] != 1.0 || len(out["toolCalls"].([]any)) != 0 || out["stopReason"] != "completed" {
		t.Errorf("result %v, want one iteration without tool calls", out)
	}
	if snap := s.loopSnapshot(t, out["runId"].(string)); snap["maxIterations"] != 1.0 {
		t.Errorf("run's maxIterations %v, want 1", snap["maxIterations"])
	}
}

// stallingUpstream is an Ollama endpoint that never answers; it reports
// each request it gets and how its context ended.
func stallingUpstream(t *testing.T) (url string, asked chan struct{}, ended chan error) {
	asked, ended = make(chan struct{}, 10), make(chan error, 10)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then net/http notices the client going away
		asked <- struct{}{}
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-release:
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv.URL, asked, ended
}

func TestDelegateTimeout(t *testing.T) {
	upstream, asked, ended := stallingUpstream(t)
	s := start(t, map[string]string{"SAMPLING_PROVIDER": "ollama", "SAMPLING_ENDPOINT": upstream}, "")
	cs := connect(t, s.url, nil)
	out := structured(t, callTool(t, cs, "agent_delegate", map[string]any{"goal": "Wait", "timeoutMs": 100}))
	if out["success"] != false || out["stopReason"] != "timeout" || !strings.Contains(out["error"].(string), "did not finish within 100ms") {
		t.Errorf("result %v, want a timeout", out)
	}
	testwait.Recv(t, asked, "the model call")
	testwait.Recv(t, ended, "the model call cancelled")
	if snap := s.loopSnapshot(t, out["runId"].(string)); snap["status"] != "timeout" {
		t.Errorf("run status %v, want timeout", snap["status"])
	}
}

// TestDelegateCancelled: notifications/cancelled for the tool call cancels
// the loop and its model call.
func TestDelegateCancelled(t *testing.T) {
	upstream, asked, ended := stallingUpstream(t)
	s := start(t, map[string]string{"SAMPLING_PROVIDER": "ollama", "SAMPLING_ENDPOINT": upstream}, "")
	cs := connect(t, s.url, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_delegate", Arguments: map[string]any{"goal": "Wait"}})
		errc <- err
	}()
	testwait.Recv(t, asked, "the model call")
	cancel()
	if err := testwait.Recv(t, ended, "the model call cancelled"); err == nil {
		t.Error("the model call ended without cancellation")
	}
	if err := testwait.Recv(t, errc, "the call's end"); err == nil {
		t.Error("the cancelled call returned a result")
	}
	testwait.Poll(t, pollEvery, testwait.Timeout, "the cancelled loop counted", func() bool {
		return s.metric(t, "sampled_loops_total", map[string]string{"status": "cancelled"}) == 1 &&
			s.toolCalls(t, "agent_delegate", "service", "cancelled") == 1
	})
}
