package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// Defaults of agent_delegate.
const (
	delegateMaxIterations = 5
	delegateTimeout       = 60 * time.Second
)

// delegateIn are agent_delegate's arguments; go-sdk applies the defaults
// of its schema.
type delegateIn struct {
	Goal          string   `json:"goal" jsonschema:"The sub-task to accomplish."`
	Context       string   `json:"context,omitempty" jsonschema:"What the sub-task needs to know."`
	AllowedTools  []string `json:"allowedTools,omitempty" jsonschema:"Glob patterns over the tool names the loop may use (GET /v1/tools), e.g. std__*; none allows every tool."`
	MaxIterations int      `json:"maxIterations,omitempty"`
	TimeoutMs     int64    `json:"timeoutMs,omitempty"`
}

// delegateResult is agent_delegate's structured result.
type delegateResult struct {
	Success    bool       `json:"success"`
	Result     string     `json:"result" jsonschema:"The loop's final answer."`
	StopReason string     `json:"stopReason"`
	Iterations int        `json:"iterations"`
	ToolCalls  []toolCall `json:"toolCalls"`
	// RunID is the loop's run (GET /v1/loops/{runId}); empty when the
	// client ran the loop and did not name its run.
	RunID string `json:"runId,omitempty" jsonschema:"The run at GET /v1/loops/{runId}, with its events at /v1/loops/{runId}/events."`
	Error string `json:"error,omitempty" jsonschema:"Why the loop did not complete."`
}

// toolCall is one tool call of a delegated loop.
type toolCall struct {
	Iteration int    `json:"iteration"`
	Name      string `json:"name"`
	IsError   bool   `json:"isError"`
}

func (s *Server) addDelegate() {
	bounds := func(p *jsonschema.Schema, most, def float64) {
		p.Minimum, p.Maximum, p.Default = jsonschema.Ptr(1.0), jsonschema.Ptr(most), json.RawMessage(fmt.Sprint(def))
	}
	add(s, &mcp.Tool{Name: "agent_delegate", Title: "Delegate", Annotations: &mcp.ToolAnnotations{OpenWorldHint: jsonschema.Ptr(true)},
		Description: "Delegate a sub-task to an agentic tool loop over sampled's tools matching allowedTools; " +
			"progress is reported per iteration. Returns the final answer, why the loop stopped, and its tool calls.",
		InputSchema: schemaOf[delegateIn](func(p props) {
			nonEmpty(p["goal"])
			p["allowedTools"].Items.MinLength = jsonschema.Ptr(1)
			bounds(p["maxIterations"], 100, delegateMaxIterations)
			bounds(p["timeoutMs"], 3600000, float64(delegateTimeout.Milliseconds()))
		}),
		OutputSchema: schemaOf[delegateResult](func(p props) {
			p["stopReason"].Enum = enum([]string{loop.StatusCompleted, loop.StatusMaxIterations, loop.StatusTimeout, loop.StatusCancelled, loop.StatusFailed})
		}),
	}, true, func(ctx context.Context, c *call, in delegateIn) (*delegateResult, error) {
		if c.by == byClient {
			return s.delegateToClient(ctx, c, in)
		}
		return s.runLoop(ctx, c, in)
	})
}

func delegatePrompt(in delegateIn) string {
	return "Goal: " + in.Goal + section("Context", in.Context)
}

const delegateSystem = systemPrefix + "Accomplish the goal, using the tools where they help, then answer with the result."

// runLoop runs the loop on sampled's engine: one progress notification
// per iteration. Cancelling ctx cancels the loop.
func (s *Server) runLoop(ctx context.Context, c *call, in delegateIn) (*delegateResult, error) {
	timeout := time.Duration(in.TimeoutMs) * time.Millisecond
	spec := loop.Spec{
		Messages:      []sampler.Message{sampler.UserMessage(sampler.TextBlock(delegatePrompt(in)))},
		SystemPrompt:  delegateSystem,
		AllowedTools:  in.AllowedTools,
		MaxIterations: &in.MaxIterations,
		Timeout:       &timeout,
	}
	// A call from a loop (sampled's own, through the tools of an MCP
	// server that is sampled) says its depth, and maybe stands for the
	// key of that loop (tools.MetaCaller): the run then belongs to that
	// key and counts against its concurrent loops until it ends, else to
	// the key of this call. The go-sdk runs a tool in the context of its
	// session, not of the HTTP request that carried the call, but hands it
	// that request's header.
	meta := c.req.Params.Meta
	depth, _ := meta[tools.MetaDepth].(float64)
	spec.Origin.Depth = int(max(min(depth, tools.MaxDepth+1), 0))
	if spec.Origin.Depth > tools.MaxDepth {
		return nil, &toolError{outcome: outcomeRefused, text: fmt.Sprintf("the loop was not started: nested too deep: this call is at depth %d, the limit is %d "+
			"(a loop's tool called agent_delegate, whose loop called it again, and so on)", spec.Origin.Depth, tools.MaxDepth)}
	}
	if s.o.Access != nil {
		token, _ := meta[tools.MetaCaller].(string)
		if spec.Caller = s.o.Access.Vouched(token); spec.Caller == nil {
			var auth string
			if c.req.Extra != nil {
				auth = c.req.Extra.Header.Get("Authorization")
			}
			caller, err := s.o.Access.Authenticate(auth)
			if err != nil {
				return nil, &toolError{outcome: outcomeRefused, text: "the loop was not started: " + err.Error()}
			}
			spec.Caller = caller
		}
	}
	snap, err := s.o.Loops.Run(tools.WithSamplingDepth(ctx, spec.Origin.Depth), spec, func(it int) {
		c.step(float64(in.MaxIterations), "iteration %d of at most %d", it, in.MaxIterations)
	})
	var limit *access.LimitError
	switch {
	case errors.As(err, &limit):
		return nil, &toolError{outcome: outcomeRefused, text: "the loop was not started: " + err.Error()}
	case errors.Is(err, loop.ErrClosed):
		return nil, &toolError{outcome: outcomeRefused, text: "the server is shutting down"}
	case err != nil:
		return nil, err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return &delegateResult{Success: snap.Status == loop.StatusCompleted, Result: snap.Result, StopReason: snap.Status,
		Iterations: snap.Iterations, ToolCalls: toolCallsOf(snap.Messages), RunID: snap.ID, Error: snap.Error}, nil
}

// toolCallsOf lists the tool calls a loop ran, from its transcript: a
// loop's n-th answer is its iteration n, and the results of its calls
// follow it.
func toolCallsOf(transcript []sampler.Message) []toolCall {
	out, names, it := []toolCall{}, map[string]string{}, 0
	for _, m := range transcript {
		if m.Role == sampler.RoleAssistant {
			it++
		}
		for _, b := range m.Content {
			switch b.Type {
			case sampler.BlockToolUse:
				names[b.ID] = b.Name
			case sampler.BlockToolResult:
				out = append(out, toolCall{Iteration: it, Name: names[b.ToolUseID], IsError: b.IsError != nil && *b.IsError})
			}
		}
	}
	return out
}

// delegateToClient asks the client to run the loop: one sampling request
// whose _meta carries the loop's hints (allowedToolPatterns,
// maxIterations), answered with the loop's final text.
func (s *Server) delegateToClient(ctx context.Context, c *call, in delegateIn) (*delegateResult, error) {
	tctx, cancel := context.WithTimeout(ctx, time.Duration(in.TimeoutMs)*time.Millisecond)
	defer cancel()
	patterns := in.AllowedTools
	if patterns == nil {
		patterns = []string{}
	}
	c.meta = map[string]any{"allowedToolPatterns": patterns, "maxIterations": in.MaxIterations}
	res, err := s.client.Sample(tctx, &sampler.Params{Request: sampler.Request{
		Messages:     []sampler.Message{sampler.UserMessage(sampler.TextBlock(delegatePrompt(in)))},
		SystemPrompt: delegateSystem,
		MaxTokens:    s.client.DefaultMaxTokens(),
	}})
	switch {
	case err != nil && ctx.Err() == nil && tctx.Err() != nil:
		return &delegateResult{StopReason: loop.StatusTimeout, ToolCalls: []toolCall{},
			Error: fmt.Sprintf("the client's loop did not finish within %dms", in.TimeoutMs)}, nil
	case err != nil:
		return nil, err
	}
	// The client ran the loop: its iterations and tool calls are its own.
	out := &delegateResult{Success: true, Result: res.Text, StopReason: loop.StatusCompleted, ToolCalls: []toolCall{}}
	if len(sampler.ToolCallsOf(res.Content)) > 0 {
		out.Success, out.StopReason = false, loop.StatusFailed
		out.Error = "the client answered with tool calls instead of running the loop"
	}
	return out, nil
}
