package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// Event names of a loop's event stream. Later versions of the service may
// add others; Events yields them with a nil Data.
const (
	EventLoopStarted        = "loop.started"
	EventModelCompleted     = "model.completed"
	EventToolStarted        = "tool.started"
	EventToolCompleted      = "tool.completed"
	EventToolSampling       = "tool.sampling"
	EventIterationCompleted = "iteration.completed"
	EventLoopCompleted      = "loop.completed"
)

// Event is one event of a loop's stream.
type Event struct {
	// ID is the event's position in the run's log, from 1.
	ID int64
	// Name is the SSE event name, one of the Event* constants.
	Name string
	// Data is the event's data decoded by Name: *LoopStartedData,
	// *ModelCompletedData, *ToolStartedData, *ToolCompletedData,
	// *IterationCompletedData or *LoopCompletedData; nil for a name this
	// package does not know.
	Data any
	// Raw is the event's data as received.
	Raw json.RawMessage
}

// LoopStartedData is the data of loop.started, the first event of a run.
type LoopStartedData struct {
	ID      string `json:"id"`
	TraceID string `json:"traceId"`
	// Model is the model the request named; empty when it named none.
	Model         string   `json:"model"`
	Tools         []string `json:"tools"`
	MaxIterations int      `json:"maxIterations"`
	TimeoutMs     int64    `json:"timeoutMs"`
}

// ModelCompletedData is the data of model.completed, sent after each model
// call that answered.
type ModelCompletedData struct {
	Iteration  int                         `json:"iteration"`
	Model      string                      `json:"model"`
	StopReason string                      `json:"stopReason"`
	Text       string                      `json:"text"`
	ToolCalls  []ToolCall[json.RawMessage] `json:"toolCalls"`
	Usage      Usage                       `json:"usage"`
	DurationMs int64                       `json:"durationMs"`
}

// ToolStartedData is the data of tool.started.
type ToolStartedData struct {
	Iteration int             `json:"iteration"`
	CallID    string          `json:"callId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolCompletedData is the data of tool.completed: the tool's result as the
// model gets it.
type ToolCompletedData struct {
	Iteration         int             `json:"iteration"`
	CallID            string          `json:"callId"`
	Name              string          `json:"name"`
	IsError           bool            `json:"isError"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	DurationMs        int64           `json:"durationMs"`
}

// ToolSamplingData is the data of tool.sampling: while the tool call
// CallID was in flight, its MCP server had the service answer a sampling
// request of its own (nested sampling), whose usage joins the run's.
type ToolSamplingData struct {
	Iteration int    `json:"iteration"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Model     string `json:"model"`
	// Run is the client-run loop that answered, when the server asked
	// for one.
	Run   string `json:"run"`
	Usage Usage  `json:"usage"`
}

// IterationCompletedData is the data of iteration.completed.
type IterationCompletedData struct {
	TraceID   string `json:"traceId"`
	Iteration int    `json:"iteration"`
	// ToolCalls are the names of the tools called; none when the model
	// answered in text.
	ToolCalls  []string `json:"toolCalls"`
	DurationMs int64    `json:"durationMs"`
}

// LoopCompletedData is the data of loop.completed, the last event of a run.
type LoopCompletedData struct {
	TraceID         string `json:"traceId"`
	Status          string `json:"status"`
	TotalIterations int    `json:"totalIterations"`
	Success         bool   `json:"success"`
	DurationMs      int64  `json:"durationMs"`
	Result          string `json:"result"`
	Error           string `json:"error"`
	Usage           Usage  `json:"usage"`
}

// Reconnection of Events: after a stream that brought no new event, the
// next attempt waits (doubling from firstBackoff up to maxBackoff, or the
// Retry-After of a 503), and gives up after maxFailures such streams in a
// row. A stream that brought events is resumed at once.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
	maxFailures  = 6
	// maxEventBytes bounds one event as read from the stream.
	maxEventBytes = 16 << 20
)

// ErrEventGap is returned by Events when the stream skipped an event id,
// which the service's contract rules out.
var ErrEventGap = errors.New("client: the event stream skipped an event")

// Events follows the run id's events (GET /v1/loops/{id}/events): the
// events logged so far, then the live ones, up to and including
// loop.completed, after which the iteration ends. When the connection drops
// or the stream ends early, Events reconnects with Last-Event-ID set to
// the last event it yielded, so every event comes once, in order, with no
// gap. It gives up, yielding the error, after a 4xx answer (a 404 *Problem
// for an unknown run, 410 when the events to resume from are no longer
// kept), after repeated failures that bring no event, or when ctx ends.
// After yielding an error the iteration ends.
//
// Breaking out of the loop closes the stream.
func (c *Client) Events(ctx context.Context, id string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		path, err := loopPath(id)
		if err != nil {
			yield(Event{}, err)
			return
		}
		path += "/events"
		var (
			last     int64
			failures int
			backoff  = c.firstBackoff
		)
		for {
			before := last
			done, wait, err := c.stream(ctx, path, &last, yield)
			if done {
				return
			}
			if ctx.Err() != nil {
				yield(Event{}, fmt.Errorf("client: events of %s: %w", id, ctx.Err()))
				return
			}
			if last > before {
				failures, backoff = 0, c.firstBackoff
				continue
			}
			if failures++; failures >= maxFailures {
				yield(Event{}, fmt.Errorf("client: events of %s: gave up after %d attempts: %w", id, failures, err))
				return
			}
			if wait < backoff {
				wait = backoff
			}
			backoff = min(2*backoff, maxBackoff)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				yield(Event{}, fmt.Errorf("client: events of %s: %w", id, ctx.Err()))
				return
			case <-t.C:
			}
		}
	}
}

// stream reads one connection's events after *last, yielding each and
// moving *last. done reports that the iteration is over: the terminal
// event came, the consumer stopped, or an error was yielded. Otherwise the
// stream ended early and err (possibly nil) says why; wait is how long the
// service asked to wait before the next attempt.
func (c *Client) stream(ctx context.Context, path string, last *int64, yield func(Event, error) bool) (done bool, wait time.Duration, err error) {
	req, err := c.newRequest(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return true, 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := errorFrom(resp)
		var p *Problem
		if errors.As(err, &p) && p.Status >= 500 {
			return false, p.RetryAfter, err
		}
		yield(Event{}, err)
		return true, 0, err
	}
	// go-sse's Read dispatches an event whose lines came whole but whose
	// closing empty line did not; the SSE standard drops it. An EOF read
	// as unexpected makes Read drop it too.
	for m, err := range sse.Read(eofUnexpected{resp.Body}, &sse.ReadConfig{MaxEventSize: maxEventBytes}) {
		if err != nil {
			return false, 0, err
		}
		ev, err := decodeEvent(m)
		if err != nil {
			yield(Event{}, err)
			return true, 0, err
		}
		switch {
		case ev.ID <= *last:
			continue // already yielded
		case ev.ID != *last+1:
			err := fmt.Errorf("%w: %d follows %d", ErrEventGap, ev.ID, *last)
			yield(Event{}, err)
			return true, 0, err
		}
		*last = ev.ID
		if !yield(ev, nil) || ev.Name == EventLoopCompleted {
			return true, 0, nil
		}
	}
	return false, 0, io.ErrUnexpectedEOF // not reached: Read ends with an error
}

// decodeEvent reads an SSE message as an Event.
func decodeEvent(m sse.Event) (Event, error) {
	id, err := strconv.ParseInt(m.LastEventID, 10, 64)
	if err != nil || id < 1 {
		return Event{}, fmt.Errorf("client: event %q has no valid id (%q)", m.Type, m.LastEventID)
	}
	ev := Event{ID: id, Name: m.Type, Raw: json.RawMessage(m.Data)}
	switch m.Type {
	case EventLoopStarted:
		ev.Data = new(LoopStartedData)
	case EventModelCompleted:
		ev.Data = new(ModelCompletedData)
	case EventToolStarted:
		ev.Data = new(ToolStartedData)
	case EventToolCompleted:
		ev.Data = new(ToolCompletedData)
	case EventToolSampling:
		ev.Data = new(ToolSamplingData)
	case EventIterationCompleted:
		ev.Data = new(IterationCompletedData)
	case EventLoopCompleted:
		ev.Data = new(LoopCompletedData)
	default:
		return ev, nil
	}
	if err := json.Unmarshal(ev.Raw, ev.Data); err != nil {
		return Event{}, fmt.Errorf("client: event %d (%s): %w", id, m.Type, err)
	}
	return ev, nil
}

// eofUnexpected reads r, turning its EOF into io.ErrUnexpectedEOF.
type eofUnexpected struct{ r io.Reader }

// Read reads from the underlying reader.
func (e eofUnexpected) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
