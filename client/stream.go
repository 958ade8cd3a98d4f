package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"

	sse "github.com/tmaxmax/go-sse"
)

// Routes of the sampling requests that stream (SampleStream).
const (
	RouteSample       = "v1/sample"
	RouteSampleSchema = "v1/sample/schema"
	RouteSampleTools  = "v1/sample/tools"
)

// Delta is a fragment of a streamed answer: a piece of its text, or a
// piece of one of its tool calls.
type Delta struct {
	// Attempt is the attempt the fragment belongs to, from 1: after a
	// Retry, the next attempt's fragments start the answer over.
	Attempt  int            `json:"attempt"`
	Text     string         `json:"text"`
	ToolCall *ToolCallDelta `json:"toolCall"`
}

// ToolCallDelta is a piece of a tool call's arguments (JSON text), with
// the call's place among the answer's calls, its id and its tool's name.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Retry says that a guaranteed helper starts another attempt, because of
// Errors in the previous attempt's answer.
type Retry struct {
	Attempt int          `json:"attempt"`
	Errors  []FieldError `json:"errors"`
}

// StreamEvent is one event of a streamed answer: exactly one of Delta,
// Retry and Result is set. Result comes last.
type StreamEvent struct {
	Delta  *Delta
	Retry  *Retry
	Result *Result
}

// SampleStream runs req on route (RouteSample, RouteSampleSchema or
// RouteSampleTools) and yields its answer as it is made: deltas, the
// retries of a guaranteed helper, and last the Result, which is what the
// route answers without streaming. A failure is yielded as an error (a
// *Problem, or a *ValidationError when the attempts ran out), after which
// the iteration ends. A sampling answer is not kept by the service, so a
// dropped stream is not resumed: the error says it broke off.
//
// Breaking out of the loop closes the stream, which cancels the request.
func (c *Client) SampleStream(ctx context.Context, route string, req *SampleRequest) iter.Seq2[StreamEvent, error] {
	return func(yield func(StreamEvent, error) bool) {
		hreq, err := c.newRequest(ctx, http.MethodPost, route, nil, req)
		if err != nil {
			yield(StreamEvent{}, err)
			return
		}
		hreq.Header.Set("Accept", "text/event-stream")
		resp, err := c.http.Do(hreq)
		if err != nil {
			yield(StreamEvent{}, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			yield(StreamEvent{}, errorFrom(resp))
			return
		}
		for m, err := range sse.Read(eofUnexpected{resp.Body}, &sse.ReadConfig{MaxEventSize: maxEventBytes}) {
			if err != nil {
				yield(StreamEvent{}, fmt.Errorf("client: the answer broke off: %w", err))
				return
			}
			var ev StreamEvent
			switch m.Type {
			case "delta":
				ev.Delta = new(Delta)
				err = json.Unmarshal([]byte(m.Data), ev.Delta)
			case "attempt":
				ev.Retry = new(Retry)
				err = json.Unmarshal([]byte(m.Data), ev.Retry)
			case "result":
				ev.Result = new(Result)
				err = json.Unmarshal([]byte(m.Data), ev.Result)
			case "error":
				yield(StreamEvent{}, problemFrom(&Problem{Type: "about:blank"}, []byte(m.Data)))
				return
			default:
				continue // an event this package does not know
			}
			if err != nil {
				yield(StreamEvent{}, fmt.Errorf("client: decode a %s event: %w", m.Type, err))
				return
			}
			if !yield(ev, nil) || ev.Result != nil {
				return
			}
		}
	}
}
