package mcpserver_test

//lint:file-ignore SA1019 MCP sampling, deprecated by the 2026-07-28 revision, is what this file is about; it works on 2025-11-25 sessions, the only ones /mcp keeps.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/testing/testwait"
)

// samplingClient answers sampled's sampling/createMessage requests with
// the texts of answers, one per request (the last repeats), and records the
// requests.
type samplingClient struct {
	mu       sync.Mutex
	answers  []string
	requests []*mcp.CreateMessageWithToolsParams
	block    bool          // wait for the request's cancellation (or release) instead
	release  chan struct{} // closed when the test ends
	asked    chan struct{} // one value per request
	done     chan error    // the context error of a blocked request
}

func newSamplingClient(answers ...string) *samplingClient {
	return &samplingClient{answers: answers, asked: make(chan struct{}, 100), done: make(chan error, 100), release: make(chan struct{})}
}

func (c *samplingClient) handle(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	c.mu.Lock()
	c.requests = append(c.requests, req.Params)
	n := len(c.requests)
	c.mu.Unlock()
	c.asked <- struct{}{}
	if c.block {
		select {
		case <-ctx.Done():
			c.done <- ctx.Err()
			return nil, ctx.Err()
		case <-c.release:
			return nil, errors.New("released")
		}
	}
	answer := c.answers[min(n, len(c.answers))-1]
	return &mcp.CreateMessageWithToolsResult{Model: "client-model", Role: "assistant", StopReason: "endTurn",
		Content: []mcp.Content{&mcp.TextContent{Text: answer}}}, nil
}

func (c *samplingClient) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{CreateMessageWithToolsHandler: c.handle}
}

func (c *samplingClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

// TestClientSamples: a client that declared sampling answers the tool's
// request; sampled validates the answer, corrects a bad one with the
// domain's corrective turn, and returns the valid one.
func TestClientSamples(t *testing.T) {
	s := start(t, map[string]string{}, "")
	sc := newSamplingClient(`{"choice":"maybe","reasoning":"unsure","confidence":2}`, "```json\n{\"choice\":\"no\",\"reasoning\":\"too risky\",\"confidence\":0.7}\n```")
	cs := connect(t, s.url, sc.options())
	out := structured(t, callTool(t, cs, "agent_decide", map[string]any{"question": "Deploy on Friday?"}))
	if out["choice"] != "no" || out["reasoning"] != "too risky" || out["confidence"] != 0.7 {
		t.Errorf("result %v, want the client's second answer", out)
	}
	if sc.count() != 2 {
		t.Fatalf("%d sampling requests, want 2 (one correction)", sc.count())
	}
	first, second := sc.requests[0], sc.requests[1]
	if !strings.Contains(first.SystemPrompt, `"enum":["yes","no"]`) || !strings.Contains(first.SystemPrompt, "JSON Schema") {
		t.Errorf("the request does not carry the answer's schema: %q", first.SystemPrompt)
	}
	if len(first.Messages) != 1 || len(second.Messages) != 3 {
		t.Fatalf("messages %d then %d, want 1 then 3 (the answer and its correction)", len(first.Messages), len(second.Messages))
	}
	correction := second.Messages[2].Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"Fix these errors", "/choice", "/confidence"} {
		if !strings.Contains(correction, want) {
			t.Errorf("correction %q lacks %q", correction, want)
		}
	}
	if got := s.toolCalls(t, "agent_decide", "client", "ok"); got != 1 {
		t.Errorf("client-sampled calls counted %v, want 1", got)
	}
}

func TestClientExhaustionIsAToolError(t *testing.T) {
	s := start(t, map[string]string{}, "")
	sc := newSamplingClient("not JSON at all")
	cs := connect(t, s.url, sc.options())
	res := callTool(t, cs, "agent_extract", map[string]any{"text": "x", "schema": map[string]any{"type": "object"}})
	if !res.IsError || !strings.Contains(text(res), "no valid answer after 3 attempts") || sc.count() != 3 {
		t.Errorf("isError %v, %d requests, text %q", res.IsError, sc.count(), text(res))
	}
}

func TestSamplingModes(t *testing.T) {
	tests := []struct {
		name        string
		mode        string
		declare     bool // the client declares sampling
		wantClient  bool // the client is asked
		wantRefused bool
	}{
		{name: "auto, capable client", mode: "auto", declare: true, wantClient: true},
		{name: "auto, client without sampling", mode: "auto"},
		{name: "service, capable client", mode: "service", declare: true},
		{name: "client, capable client", mode: "client", declare: true, wantClient: true},
		{name: "client, client without sampling", mode: "client", wantRefused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, map[string]string{"SAMPLED_MCP_SAMPLING": tt.mode}, "")
			sc := newSamplingClient(`{"summary":"short","keyPoints":["one"]}`)
			var o *mcp.ClientOptions
			if tt.declare {
				o = sc.options()
			}
			cs := connect(t, s.url, o)
			res := callTool(t, cs, "agent_summarize", map[string]any{"text": "A long text."})
			if tt.wantRefused {
				if !res.IsError || !strings.Contains(text(res), "did not declare the sampling capability") {
					t.Errorf("isError %v, text %q; want a refusal", res.IsError, text(res))
				}
				return
			}
			out := structured(t, res)
			if got := sc.count() > 0; got != tt.wantClient {
				t.Errorf("client asked: %v, want %v", got, tt.wantClient)
			}
			if tt.wantClient && out["summary"] != "short" {
				t.Errorf("summary %v, want the client's", out["summary"])
			}
		})
	}
}

// TestCancelWhileTheClientSamples: cancelling the tool call ends sampled's
// wait for the client's answer, the call gets no result, and the client
// hears of it: notifications/cancelled for its sampling request cancels
// its handler. (go-sdk v1.8.0 sends it with the context of the sampling
// request, which routes it to the tool call's stream, which the client
// stopped reading when it cancelled the call: without sampled's unrouted
// context it was lost.)
func TestCancelWhileTheClientSamples(t *testing.T) {
	s := start(t, map[string]string{}, "")
	sc := newSamplingClient()
	sc.block = true
	cs := connect(t, s.url, sc.options())
	t.Cleanup(func() { close(sc.release) })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_decide", Arguments: map[string]any{"question": "q"}})
		errc <- err
	}()
	testwait.Recv(t, sc.asked, "the sampling request")
	cancel()
	testwait.Poll(t, pollEvery, testwait.Timeout, "the cancelled call counted", func() bool {
		return s.toolCalls(t, "agent_decide", "client", "cancelled") == 1
	})
	if err := testwait.Recv(t, errc, "the call's end"); err == nil {
		t.Error("the cancelled call returned no error")
	}
	if err := testwait.Recv(t, sc.done, "the client's sampling cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("the client's sampling ended with %v, want it cancelled", err)
	}
}

// TestDelegateToTheClient: with sampling and tools declared, the client
// runs the loop, given the hints in _meta.
func TestDelegateToTheClient(t *testing.T) {
	s := start(t, map[string]string{}, "")
	sc := newSamplingClient("The answer is 42.")
	cs := connect(t, s.url, sc.options())
	out := structured(t, callTool(t, cs, "agent_delegate", map[string]any{"goal": "Compute 6*7", "allowedTools": []string{"std__calc*"}, "maxIterations": 3}))
	if out["success"] != true || out["result"] != "The answer is 42." || out["stopReason"] != "completed" {
		t.Errorf("result %v", out)
	}
	meta, _ := json.Marshal(sc.requests[0].Meta)
	if string(meta) != `{"allowedToolPatterns":["std__calc*"],"maxIterations":3}` {
		t.Errorf("_meta %s, want the loop's hints", meta)
	}
}

func TestDelegateToTheClientTimesOut(t *testing.T) {
	s := start(t, map[string]string{}, "")
	sc := newSamplingClient()
	sc.block = true
	cs := connect(t, s.url, sc.options())
	t.Cleanup(func() { close(sc.release) })
	out := structured(t, callTool(t, cs, "agent_delegate", map[string]any{"goal": "wait", "timeoutMs": 50}))
	if out["success"] != false || out["stopReason"] != "timeout" {
		t.Errorf("result %v, want a timeout", out)
	}
}

// TestDelegateNeedsSamplingWithTools: a client that samples without tools
// does not run agent_delegate's loop: sampled does (auto), or the call is
// refused (client).
func TestDelegateNeedsSamplingWithTools(t *testing.T) {
	plain := &mcp.ClientOptions{CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "client"}}, nil
	}}
	s := start(t, map[string]string{}, "")
	out := structured(t, callTool(t, connect(t, s.url, plain), "agent_delegate", map[string]any{"goal": "calculate 1+1"}))
	if out["runId"] == nil || out["result"] == "client" {
		t.Errorf("auto: %v, want sampled's loop", out)
	}
	s = start(t, map[string]string{"SAMPLED_MCP_SAMPLING": "client"}, "")
	res := callTool(t, connect(t, s.url, plain), "agent_delegate", map[string]any{"goal": "calculate 1+1"})
	if !res.IsError || !strings.Contains(text(res), "sampling with tools") {
		t.Errorf("client: isError %v, %q; want a refusal", res.IsError, text(res))
	}
}
