package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Loop statuses: running until the run ends, then one of the others.
const (
	LoopRunning       = "running"
	LoopCompleted     = "completed"
	LoopMaxIterations = "max_iterations"
	LoopTimeout       = "timeout"
	LoopCancelled     = "cancelled"
	LoopFailed        = "failed"
)

// LoopRequest is the body of POST /v1/loops. Give Prompt or Messages, not
// both. Zero fields are left out and take the service's defaults.
type LoopRequest struct {
	// Prompt is shorthand for one user message holding one text block.
	Prompt       string    `json:"prompt,omitempty"`
	Messages     []Message `json:"messages,omitempty"`
	SystemPrompt string    `json:"systemPrompt,omitempty"`
	// Model and ModelPreferences choose the model as in SampleRequest; an
	// unknown model fails the run.
	Model            string            `json:"model,omitempty"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	// AllowedTools are glob patterns over the exposed tool names
	// (GET /v1/tools), e.g. "std__*"; none allows every tool.
	AllowedTools []string `json:"allowedTools,omitempty"`
	// ToolChoice applies to the first iteration; later ones use auto.
	ToolChoice    *ToolChoice `json:"toolChoice,omitempty"`
	MaxIterations int         `json:"maxIterations,omitempty"`
	// TimeoutMs limits the whole run, in milliseconds.
	TimeoutMs   int64    `json:"timeoutMs,omitempty"`
	MaxTokens   int      `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

// LoopLinks are where a run is read (Self; DELETE cancels it) and followed
// (Events), as paths of the service.
type LoopLinks struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// LoopStarted is the answer of StartLoop.
type LoopStarted struct {
	ID     string    `json:"id"`
	Status string    `json:"status"`
	Links  LoopLinks `json:"links"`
}

// LoopRun is a loop run as it stands (GET /v1/loops/{id}).
type LoopRun struct {
	ID      string `json:"id"`
	TraceID string `json:"traceId"`
	// Status is LoopRunning or the final status.
	Status string `json:"status"`
	// Model is the model that answered last, "provider/model"; empty
	// before the first answer.
	Model string `json:"model"`
	// Tools are the exposed names of the tools the loop may use.
	Tools         []string `json:"tools"`
	MaxIterations int      `json:"maxIterations"`
	TimeoutMs     int64    `json:"timeoutMs"`
	// Iterations counts the model calls answered so far.
	Iterations int `json:"iterations"`
	// Messages is the transcript so far.
	Messages []Message `json:"messages"`
	// Result is the model's final text once the run completed.
	Result string `json:"result"`
	// Error says why the run ended early (timeout, cancelled, failed).
	Error string `json:"error"`
	Usage Usage  `json:"usage"`
	// Origin says who started the run, as the service reports it (absent
	// for runs started over REST by services that do not report it).
	Origin     json.RawMessage `json:"origin,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	FinishedAt *time.Time      `json:"finishedAt"`
	Links      LoopLinks       `json:"links"`
}

// StartLoop starts a tool loop (POST /v1/loops) and returns as soon as it
// runs. Follow it with Events, read it with Loop.
func (c *Client) StartLoop(ctx context.Context, req *LoopRequest) (*LoopStarted, error) {
	var out LoopStarted
	if err := c.do(ctx, http.MethodPost, "v1/loops", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Loop reads a run (GET /v1/loops/{id}). An unknown or expired run is a
// 404 *Problem.
func (c *Client) Loop(ctx context.Context, id string) (*LoopRun, error) {
	p, err := loopPath(id)
	if err != nil {
		return nil, err
	}
	var out LoopRun
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelLoop asks the service to cancel a running loop (DELETE
// /v1/loops/{id}); it does not wait for the run to end (Events ends with
// loop.completed, status cancelled). A run that has already finished is a
// 409 *Problem, an unknown one a 404 *Problem.
func (c *Client) CancelLoop(ctx context.Context, id string) error {
	p, err := loopPath(id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil, nil)
}

// ListLoopsOptions filter and page ListLoops. Zero fields do not filter.
type ListLoopsOptions struct {
	// Status keeps the runs with this status (e.g. LoopRunning).
	Status string
	// Origin keeps the runs of this origin.
	Origin string
	// Limit is the most runs of a page; 0 means the service's default.
	Limit int
	// Cursor continues a listing where the page that returned it as Next
	// ended; empty starts with the newest run.
	Cursor string
}

// LoopPage is a page of ListLoops.
type LoopPage struct {
	// Loops are runs, newest first.
	Loops []LoopRun `json:"loops"`
	// Next is the Cursor of the next page; empty on the last page.
	Next string `json:"next"`
}

// ListLoops lists runs, newest first, a page at a time (GET /v1/loops).
func (c *Client) ListLoops(ctx context.Context, opts *ListLoopsOptions) (*LoopPage, error) {
	q := url.Values{}
	if opts != nil {
		for k, v := range map[string]string{"status": opts.Status, "origin": opts.Origin, "cursor": opts.Cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if opts.Limit > 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
	}
	var out LoopPage
	if err := c.do(ctx, http.MethodGet, "v1/loops", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// loopPath is the path of the run id, refusing ids that would name
// another path.
func loopPath(id string) (string, error) {
	if id == "" || id == "." || id == ".." {
		return "", fmt.Errorf("client: invalid loop id %q", id)
	}
	return "v1/loops/" + url.PathEscape(id), nil
}
