package sampler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Delta is a fragment of an answer as it arrives: a piece of its text, or
// a piece of one of its tool calls. A streamed request's deltas, joined in
// order, make the answer's text and its calls' arguments.
type Delta struct {
	// Attempt is the attempt the fragment belongs to (from 1): a guaranteed
	// helper's later attempt starts over.
	Attempt  int            `json:"attempt"`
	Text     string         `json:"text,omitempty"`
	ToolCall *ToolCallDelta `json:"toolCall,omitempty"`
}

// ToolCallDelta is a fragment of a tool call: the call's place among the
// answer's calls, its id and tool name (on every fragment), and a piece of
// its arguments' JSON text.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
}

// Streamer is a Provider that streams from its provider. Stream runs one
// model call as Sample does and hands each fragment of the answer to emit
// as it arrives, in order and on the calling goroutine (Delta.Attempt is
// left 0: the Service sets it). The Response it returns is the whole
// answer, as Sample would have returned it. A provider that is not a
// Streamer is asked with Sample and its answer emitted whole.
type Streamer interface {
	Stream(ctx context.Context, req *Request, emit func(Delta)) (*Response, error)
}

// DefaultIdleTimeout bounds the wait for each fragment of a streamed call,
// the first included, unless Options say otherwise.
const DefaultIdleTimeout = 60 * time.Second

// errIdle ends a streamed call whose provider fell silent.
var errIdle = errors.New("stream idle")

// Stream runs one call of prov for a caller that takes deltas: a Streamer
// streams; any other provider answers whole, and its answer is emitted as
// the deltas a stream of it would have carried.
func Stream(ctx context.Context, prov Provider, req *Request, emit func(Delta)) (*Response, error) {
	if st, ok := prov.(Streamer); ok {
		return st.Stream(ctx, req, emit)
	}
	resp, err := prov.Sample(ctx, req)
	if err == nil {
		EmitWhole(resp.Content, emit)
	}
	return resp, err
}

// stream runs one streamed call of prov under an idle timeout that
// restarts with each fragment. emitted is set once a fragment has reached
// the caller.
func (s *Service) stream(ctx context.Context, prov Provider, req *Request, emit func(Delta), emitted *bool) (*Response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(s.idleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()
	resp, err := Stream(ctx, prov, req, func(d Delta) {
		idle.Reset(s.idleTimeout)
		*emitted = true
		emit(d)
	})
	if err != nil && errors.Is(context.Cause(ctx), errIdle) {
		err = &UpstreamError{Provider: prov.Name(), Timeout: true,
			Message: fmt.Sprintf("no fragment of the stream within %s", s.idleTimeout), Err: err}
	}
	return resp, err
}

// EmitWhole emits a whole answer as the deltas a stream of it would have
// carried: one for each text block and one for each tool call.
func EmitWhole(content []Content, emit func(Delta)) {
	calls := 0
	for _, c := range content {
		switch c.Type {
		case BlockText:
			if c.Text != "" {
				emit(Delta{Text: c.Text})
			}
		case BlockToolUse:
			args := c.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			emit(Delta{ToolCall: &ToolCallDelta{Index: calls, ID: c.ID, Name: c.Name, Arguments: string(args)}})
			calls++
		}
	}
}
