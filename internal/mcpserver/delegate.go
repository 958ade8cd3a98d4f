package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/sampler"
)

// Defaults of agent_delegate.
const (
	delegateMaxIterations = 5
	delegateTimeout       = 60 * time.Second
)

// delegateArgs are agent_delegate's arguments.
type delegateArgs struct {
	Goal          string   `json:"goal"`
	Context       string   `json:"context"`
	AllowedTools  []string `json:"allowedTools"`
	MaxIterations *int     `json:"maxIterations"`
	TimeoutMs     *int64   `json:"timeoutMs"`
}

// delegateResult is agent_delegate's structured result.
type delegateResult struct {
	Success    bool       `json:"success"`
	Result     string     `json:"result"`
	StopReason string     `json:"stopReason"`
	Iterations int        `json:"iterations"`
	ToolCalls  []toolCall `json:"toolCalls"`
	// RunID is the loop's run (GET /v1/loops/{runId}); empty when the
	// client ran the loop and did not name its run.
	RunID string `json:"runId,omitempty"`
	Error string `json:"error,omitempty"`
}

// toolCall is one tool call of a delegated loop.
type toolCall struct {
	Iteration int    `json:"iteration"`
	Name      string `json:"name"`
	IsError   bool   `json:"isError"`
}

func (s *Server) delegate() tool {
	input := object(js{
		"goal":    js{"type": "string", "minLength": 1, "description": "The sub-task to accomplish."},
		"context": str("What the sub-task needs to know."),
		"allowedTools": js{"type": "array", "items": js{"type": "string", "minLength": 1},
			"description": "Glob patterns over the tool names the loop may use (GET /v1/tools), e.g. std__*; none allows every tool."},
		"maxIterations": js{"type": "integer", "minimum": 1, "maximum": 100, "default": delegateMaxIterations},
		"timeoutMs":     js{"type": "integer", "minimum": 1, "maximum": 3600000, "default": delegateTimeout.Milliseconds()},
	}, "goal")
	output := object(js{
		"success":    js{"type": "boolean"},
		"result":     js{"type": "string", "description": "The loop's final answer."},
		"stopReason": js{"type": "string", "enum": []string{loop.StatusCompleted, loop.StatusMaxIterations, loop.StatusTimeout, loop.StatusCancelled, loop.StatusFailed}},
		"iterations": js{"type": "integer", "minimum": 0},
		"toolCalls": js{"type": "array", "items": object(js{
			"iteration": js{"type": "integer", "minimum": 1}, "name": js{"type": "string"}, "isError": js{"type": "boolean"},
		}, "iteration", "name", "isError")},
		"runId": str("The run at GET /v1/loops/{runId}, with its events at /v1/loops/{runId}/events."),
		"error": str("Why the loop did not complete."),
	}, "success", "result", "stopReason", "iterations", "toolCalls")
	return tool{
		def: &mcp.Tool{Name: "agent_delegate", Title: "Delegate",
			Description: "Delegate a sub-task to an agentic tool loop over sampled's tools matching allowedTools; " +
				"progress is reported per iteration. Returns the final answer, why the loop stopped, and its tool calls.",
			InputSchema: raw(input), OutputSchema: raw(output),
			Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}},
		needsTools: true,
		run: func(ctx context.Context, c *call) (any, error) {
			a, err := decode[delegateArgs](c.req.Params.Arguments)
			if err != nil {
				return nil, err
			}
			if a.MaxIterations == nil {
				a.MaxIterations = ptr(delegateMaxIterations)
			}
			if a.TimeoutMs == nil {
				a.TimeoutMs = ptr(delegateTimeout.Milliseconds())
			}
			if c.by == byClient {
				return s.delegateToClient(ctx, c, a)
			}
			return s.runLoop(ctx, c, a)
		},
	}
}

func delegatePrompt(a delegateArgs) string {
	return "Goal: " + a.Goal + section("Context", a.Context)
}

const delegateSystem = systemPrefix + "Accomplish the goal, using the tools where they help, then answer with the result."

// runLoop runs the loop on sampled's engine and follows its events: one
// progress notification per iteration. Cancelling ctx cancels the loop.
func (s *Server) runLoop(ctx context.Context, c *call, a delegateArgs) (any, error) {
	if s.o.Loops == nil || s.o.Runs == nil {
		return nil, &toolError{outcome: outcomeRefused, text: "this server runs no tool loops"}
	}
	timeout := time.Duration(*a.TimeoutMs) * time.Millisecond
	spec := loop.Spec{
		Messages:      []sampler.Message{sampler.UserMessage(sampler.TextBlock(delegatePrompt(a)))},
		SystemPrompt:  delegateSystem,
		AllowedTools:  a.AllowedTools,
		MaxIterations: a.MaxIterations,
		Timeout:       &timeout,
	}
	// The run belongs to the key of this call, and counts against its
	// concurrent loops until it ends. The go-sdk runs a tool in the
	// context of its session, not of the HTTP request that carried the
	// call, but hands it that request's header.
	if s.o.Access != nil {
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
	id, err := s.o.Loops.Start(ctx, spec)
	var limit *loop.LimitError
	switch {
	case errors.As(err, &limit):
		return nil, &toolError{outcome: outcomeRefused, text: "the loop was not started: " + err.Error()}
	case errors.Is(err, loop.ErrClosed):
		return nil, &toolError{outcome: outcomeRefused, text: "the server is shutting down"}
	case err != nil:
		return nil, sampleError(ctx, err)
	}
	out := &delegateResult{RunID: id, ToolCalls: []toolCall{}}
	var after int64
	for {
		sub, err := s.o.Runs.Subscribe(ctx, id, after)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("follow run %s: %w", id, err)
		}
		done, err := s.follow(c, sub, out, *a.MaxIterations, &after)
		sub.Close()
		switch {
		case done:
			return out, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, runs.ErrSlow):
			continue // resume after the last event read
		case err != nil:
			return nil, fmt.Errorf("follow run %s: %w", id, err)
		default:
			return nil, fmt.Errorf("follow run %s: the event stream ended before the loop", id)
		}
	}
}

// follow reads a subscription's events into out until the loop's terminal
// event (done) or the subscription's end (its error).
func (s *Server) follow(c *call, sub runs.Subscription, out *delegateResult, maxIterations int, after *int64) (bool, error) {
	for ev := range sub.Events() {
		*after = ev.ID
		switch ev.Name {
		case loop.EventToolCompleted:
			var e struct {
				Iteration int    `json:"iteration"`
				Name      string `json:"name"`
				IsError   bool   `json:"isError"`
			}
			if json.Unmarshal(ev.Data, &e) == nil {
				out.ToolCalls = append(out.ToolCalls, toolCall(e))
			}
		case loop.EventIterationCompleted:
			var e struct {
				Iteration int      `json:"iteration"`
				ToolCalls []string `json:"toolCalls"`
			}
			if json.Unmarshal(ev.Data, &e) == nil {
				msg := fmt.Sprintf("iteration %d of at most %d: answered", e.Iteration, maxIterations)
				if len(e.ToolCalls) > 0 {
					msg = fmt.Sprintf("iteration %d of at most %d: called %v", e.Iteration, maxIterations, e.ToolCalls)
				}
				c.progress.step(float64(maxIterations), "%s", msg)
			}
		case loop.EventLoopCompleted:
			var e struct {
				Status          string `json:"status"`
				TotalIterations int    `json:"totalIterations"`
				Success         bool   `json:"success"`
				Result          string `json:"result"`
				Error           string `json:"error"`
			}
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return false, fmt.Errorf("decode %s: %w", ev.Name, err)
			}
			out.Success, out.Result, out.StopReason, out.Iterations, out.Error = e.Success, e.Result, e.Status, e.TotalIterations, e.Error
			return true, nil
		}
	}
	return false, sub.Err()
}

// delegateToClient asks the client to run the loop: one sampling request
// whose _meta carries the loop's hints (allowedToolPatterns,
// maxIterations), answered with the loop's final text.
func (s *Server) delegateToClient(ctx context.Context, c *call, a delegateArgs) (any, error) {
	tctx, cancel := context.WithTimeout(ctx, time.Duration(*a.TimeoutMs)*time.Millisecond)
	defer cancel()
	patterns := a.AllowedTools
	if patterns == nil {
		patterns = []string{}
	}
	svc, err := c.sampler(map[string]any{"allowedToolPatterns": patterns, "maxIterations": *a.MaxIterations})
	if err != nil {
		return nil, err
	}
	res, err := svc.Sample(tctx, &sampler.Params{Request: sampler.Request{
		Messages:     []sampler.Message{sampler.UserMessage(sampler.TextBlock(delegatePrompt(a)))},
		SystemPrompt: delegateSystem,
		MaxTokens:    svc.DefaultMaxTokens(),
	}})
	switch {
	case err != nil && ctx.Err() == nil && tctx.Err() != nil:
		return &delegateResult{StopReason: loop.StatusTimeout, ToolCalls: []toolCall{},
			Error: fmt.Sprintf("the client's loop did not finish within %dms", *a.TimeoutMs)}, nil
	case err != nil:
		return nil, sampleError(ctx, err)
	}
	// The client ran the loop: its iterations and tool calls are its own.
	out := &delegateResult{Success: true, Result: res.Text, StopReason: loop.StatusCompleted, ToolCalls: []toolCall{}}
	if len(sampler.ToolCallsOf(res.Content)) > 0 {
		out.Success, out.StopReason = false, loop.StatusFailed
		out.Error = "the client answered with tool calls instead of running the loop"
	}
	return out, nil
}
