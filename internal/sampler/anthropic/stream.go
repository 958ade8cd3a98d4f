package anthropic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/sampled/sampled/internal/sampler"
)

var _ sampler.Streamer = (*Provider)(nil)

// Stream sends req as one streamed Messages API call ("stream": true) and
// hands each text_delta and input_json_delta to emit as it arrives. The
// events are accumulated into the whole message, which is mapped as Sample
// maps its answer, so both return the same Response for the same answer.
//
// A tool call's fragments carry its id and name, and its arguments with
// the space between JSON tokens left out, so that they join to the
// compacted input of the Response. With the tool-as-schema trick the
// respond tool's input is the answer's text and is streamed as text; a
// wrapped answer ({"value": …}) is emitted whole once the stream ends.
//
// An error event of the stream is a *sampler.UpstreamError with the status
// the API gives that error type; a stream that ends before message_stop is
// one without status.
func (p *Provider) Stream(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (*sampler.Response, error) {
	params, trick, err := p.params(req)
	if err != nil {
		return nil, err
	}
	var reply *http.Response
	stream := p.messages.NewStreaming(ctx, params, option.WithResponseInto(&reply))
	defer stream.Close()

	var msg sdk.Message
	out := &fragments{emit: emit, trick: trick}
	stopped := false
	for !stopped && stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, &sampler.UpstreamError{Provider: p.name, Status: statusOf(reply),
				Message: "malformed stream", Err: p.redact.Error(err)}
		}
		out.event(ev, &msg)
		stopped = ev.Type == "message_stop"
	}
	if !stopped {
		err := stream.Err()
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			return nil, &sampler.UpstreamError{Provider: p.name, Message: "the stream ended before message_stop"}
		}
		return nil, p.streamError(ctx, err, reply)
	}
	resp := response(&msg, trick)
	out.finish(resp)
	return resp, nil
}

// streamError turns the failure of a streamed call into a
// *sampler.UpstreamError: an error event by its type, anything else as
// Sample's failures are, except that a connection lost once the stream
// had begun says so.
func (p *Provider) streamError(ctx context.Context, err error, reply *http.Response) error {
	var ae *sdk.Error
	if errors.As(err, &ae) && ae.StatusCode < http.StatusBadRequest {
		// The SDK gives an error event the status of the reply that
		// carried it, a success.
		return p.eventError(ae.RawJSON())
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return &sampler.UpstreamError{Provider: p.name, Status: statusOf(reply),
			Message: "an event of the stream is too long", Err: err}
	}
	var ue *sampler.UpstreamError
	if !errors.As(p.upstreamError(err, reply), &ue) {
		return err // not reached: upstreamError gives an *UpstreamError
	}
	if reply != nil && ue.Status == 0 && !ue.Timeout && ctx.Err() == nil {
		ue.Message = "the connection broke off mid-stream"
	}
	return ue
}

// eventError is the *sampler.UpstreamError of an error event,
// {"type":"error","error":{"type":…,"message":…}}, with the status the API
// answers that error type with before a stream begins.
func (p *Provider) eventError(raw string) error {
	body := apiErrorBody(raw)
	typ := p.redact.String(body.Error.Type)
	ue := &sampler.UpstreamError{Provider: p.name, Status: eventStatus(body.Error.Type), Message: p.redact.String(body.Error.Message)}
	if ue.Message == "" {
		ue.Message = "error event in the stream"
	}
	ue.Err = &apiError{Status: ue.Status, Type: typ, Message: ue.Message}
	return ue
}

// eventStatus maps the type of an error event to the HTTP status the API
// documents for it; an unknown type is 502.
func eventStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "api_error":
		return http.StatusInternalServerError
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	default:
		return http.StatusBadGateway
	}
}

// Kinds of content block, as fragments sees them.
const (
	blockOther   = iota // not part of the answer, or held until the end
	blockText           // text, streamed as text
	blockCall           // a tool call, streamed as a call
	blockRespond        // the respond tool's input, streamed as text
)

// block is what fragments remembers of one content block of the stream.
type block struct {
	kind int
	// call is the block's place among the answer's tool calls.
	call int
	// space drops the space between the JSON tokens of an input.
	space jsonSpace
	// sent is set once a fragment of the input has been emitted.
	sent bool
}

// fragments turns the events of a stream into deltas.
type fragments struct {
	emit  func(sampler.Delta)
	trick *trick
	// blocks follows the message's content blocks, by index.
	blocks []block
	calls  int
	// held is set when part of the answer is emitted only once the stream
	// has ended: with the trick, everything but an unwrapped respond input.
	held bool
}

// event emits the fragments of ev; msg has accumulated it already.
func (f *fragments) event(ev sdk.MessageStreamEventUnion, msg *sdk.Message) {
	switch ev.Type {
	case "message_start":
		// Blocks the message starts with, if any, are no fragments.
		f.blocks = make([]block, len(msg.Content))
	case "content_block_start":
		b := block{}
		cb := msg.Content[ev.Index]
		switch {
		case f.trick != nil && cb.Type == "tool_use" && cb.Name == RespondTool && !f.trick.wrapped:
			b.kind = blockRespond
		case f.trick != nil:
			f.held = true
		case cb.Type == "text":
			b.kind = blockText
			if cb.Text != "" {
				f.emit(sampler.Delta{Text: cb.Text})
			}
		case cb.Type == "tool_use":
			b.kind, b.call = blockCall, f.calls
			f.calls++
			f.emit(sampler.Delta{ToolCall: &sampler.ToolCallDelta{Index: b.call, ID: cb.ID, Name: cb.Name}})
		}
		f.blocks = append(f.blocks, b)
	case "content_block_delta":
		b := &f.blocks[ev.Index]
		switch {
		case b.kind == blockText && ev.Delta.Type == "text_delta" && ev.Delta.Text != "":
			f.emit(sampler.Delta{Text: ev.Delta.Text})
		case (b.kind == blockCall || b.kind == blockRespond) && ev.Delta.Type == "input_json_delta":
			f.input(b, &msg.Content[ev.Index], b.space.drop(ev.Delta.PartialJSON))
		}
	case "content_block_stop":
		if b := &f.blocks[ev.Index]; !b.sent && (b.kind == blockCall || b.kind == blockRespond) {
			// No input came: the block's input is the {} it started with.
			f.input(b, &msg.Content[ev.Index], "{}")
		}
	}
}

// input emits a fragment of the input of block b.
func (f *fragments) input(b *block, cb *sdk.ContentBlockUnion, s string) {
	if s == "" {
		return
	}
	b.sent = true
	if b.kind == blockRespond {
		f.emit(sampler.Delta{Text: s})
		return
	}
	f.emit(sampler.Delta{ToolCall: &sampler.ToolCallDelta{Index: b.call, ID: cb.ID, Name: cb.Name, Arguments: s}})
}

// finish emits what was held until the stream ended: with the trick, the
// answer, unless its respond input was streamed already.
func (f *fragments) finish(resp *sampler.Response) {
	if !f.held || f.trick == nil {
		return
	}
	for _, b := range f.blocks {
		if b.kind == blockRespond {
			return // the answer is the streamed input
		}
	}
	sampler.EmitWhole(resp.Content, f.emit)
}

// jsonSpace drops the insignificant space of a JSON text that arrives in
// pieces, as json.Compact does for a whole one: space outside strings.
type jsonSpace struct {
	inString, escaped bool
}

// drop returns piece without the space between tokens.
func (j *jsonSpace) drop(piece string) string {
	out := make([]byte, 0, len(piece))
	for i := 0; i < len(piece); i++ {
		c := piece[i]
		switch {
		case j.inString:
			switch {
			case j.escaped:
				j.escaped = false
			case c == '\\':
				j.escaped = true
			case c == '"':
				j.inString = false
			}
		case c == '"':
			j.inString = true
		case c == ' ', c == '\t', c == '\n', c == '\r':
			continue
		}
		out = append(out, c)
	}
	return string(out)
}
