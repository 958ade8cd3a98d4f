package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

// eventStreamMediaType is the Accept header of a streamed request; requests
// share it and nothing modifies it.
var eventStreamMediaType = []string{"text/event-stream"}

const (
	// maxStreamLine bounds one event of an event stream, a chunk's data
	// included; the whole stream is bounded by sampler.MaxReplyBytes.
	maxStreamLine = 4 << 20
	// drainWait and drainBytes bound the read of what follows [DONE] (the
	// end of the body), which lets the connection serve another call.
	drainWait  = 250 * time.Millisecond
	drainBytes = 4 << 10
)

// errLineTooLong is a line of an event stream longer than maxStreamLine.
var errLineTooLong = fmt.Errorf("a line of the stream exceeds %d MiB", maxStreamLine>>20)

// streamTruncated is the message of a stream that ended without [DONE]
// and without a finish reason: the connection dropped or the server gave
// up.
const streamTruncated = "the stream ended before its end"

var _ sampler.Streamer = (*Provider)(nil)

// Stream sends req as one streamed chat completion, the request Sample
// sends with "stream": true and usage asked for in the last chunk, and
// hands each fragment of the answer to emit as its chunk arrives: text and
// refusal as text, tool calls as fragments keyed by the call's place, with
// its id and name on each. It returns the whole answer, mapped as Sample
// maps a whole reply. A server that answers whole (application/json) is
// read as Sample reads it and its answer emitted at once.
//
// Errors are Sample's, and a *sampler.UpstreamError for a stream that
// ends before its end (Status 0, as a connection that drops), carries an
// error object, or holds an unreadable chunk. When ctx is cancelled the
// error satisfies errors.Is(err, context.Canceled).
func (p *Provider) Stream(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (*sampler.Response, error) {
	if req == nil {
		return nil, errors.New("openai: nil request")
	}
	if emit == nil {
		emit = func(sampler.Delta) {}
	}
	body, err := p.encodeRequest(req, true)
	if err != nil {
		return nil, err
	}
	// The request has a context of its own so that a slow end of the body
	// after [DONE] can be given up without touching the caller's.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := p.post(ctx, body, eventStreamMediaType)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if isJSON(resp.Header.Get("Content-Type")) {
		out, err := p.readWhole(ctx, resp)
		if err == nil {
			sampler.EmitWhole(out.Content, emit)
		}
		return out, err
	}
	return p.readStream(ctx, resp.StatusCode, sampler.LimitReply(resp.Body), emit, cancel)
}

// readStream reads the events of a reply body with status, emitting
// fragments, up to [DONE], then reads on a little (drain) and maps the
// answer; cancel gives up the reply's request. The end of the body before
// [DONE] ends a stream that has its finish reason (some servers leave
// [DONE] out); otherwise the stream was cut short.
func (p *Provider) readStream(ctx context.Context, status int, body io.Reader, emit func(sampler.Delta),
	cancel context.CancelFunc) (*sampler.Response, error) {
	var a assembly
	var c streamChunk
	// An event cut short by the end of the body is dropped: go-sse reads
	// an unexpected end as an error. It reports any failure of the body
	// as the end of its input; br keeps the failure itself.
	br := &bodyReader{r: body}
	for ev, err := range gosse.Read(br, &gosse.ReadConfig{MaxEventSize: maxStreamLine}) {
		if err != nil && br.err != nil {
			err = br.err
		}
		switch {
		case err != nil && errors.Is(err, io.ErrUnexpectedEOF) && a.finish != "" && ctx.Err() == nil:
			return a.response(p, status)
		case err != nil:
			return nil, p.streamError(ctx, status, err)
		case strings.TrimSpace(ev.Data) == "":
			continue
		case strings.TrimSpace(ev.Data) == "[DONE]":
			drain(body, cancel)
			return a.response(p, status)
		}
		c.reset()
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			return nil, p.unreadable(status, "unreadable stream chunk: ", err)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return nil, p.chunkError(status, c.Error)
		}
		a.add(&c.Chunk, emit)
	}
	return nil, p.streamError(ctx, status, io.ErrUnexpectedEOF) // not reached: Read ends with an error
}

// bodyReader reads r, keeping its failure, its end read as
// io.ErrUnexpectedEOF.
type bodyReader struct {
	r   io.Reader
	err error
}

// Read reads from r.
func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

// streamChunk is one event of the stream: a chunk, or the error object
// some servers (OpenAI included) send in its place when the answer fails
// midway.
type streamChunk struct {
	chat.Chunk
	Error json.RawMessage `json:"error"`
}

// reset empties c for the next chunk, keeping the array of its choices:
// encoding/json appends to a slice without zeroing what it reuses.
func (c *streamChunk) reset() {
	choices := c.Choices[:0]
	clear(choices[:cap(choices)])
	*c = streamChunk{}
	c.Choices = choices
}

// isJSON reports whether a Content-Type is JSON's.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// streamError is the error of a stream whose reading failed before its
// end: the caller's cancellation or deadline, an oversize stream or line,
// an end before the answer's (the body's, or a connection that dropped),
// or another transport failure.
func (p *Provider) streamError(ctx context.Context, status int, err error) error {
	switch {
	case ctx.Err() != nil:
		return p.transportError(ctx, err)
	case errors.Is(err, sampler.ErrReplyTooLarge):
		return &sampler.UpstreamError{Provider: p.name, Status: status, Message: err.Error()}
	case errors.Is(err, bufio.ErrTooLong):
		return &sampler.UpstreamError{Provider: p.name, Status: status, Message: errLineTooLong.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &sampler.UpstreamError{Provider: p.name, Message: streamTruncated, Err: err}
	}
	return p.transportError(ctx, err)
}

// chunkError is the *sampler.UpstreamError of an error object sent in
// place of a chunk: its message, and its *APIError when it is an object.
func (p *Provider) chunkError(status int, raw json.RawMessage) error {
	ue := &sampler.UpstreamError{Provider: p.name, Status: status, Message: "the stream carried an error"}
	if msg := replyError(raw); msg != "" {
		ue.Message += ": " + p.redact.String(msg)
	}
	var e errorObject
	if json.Unmarshal(raw, &e) == nil {
		ue.Err = p.apiError(&e)
	}
	return ue
}

// drain reads what follows [DONE], for a while and a few bytes at most, so
// that the body reaches its end and its connection can be reused; a body
// whose end is slow to come is given up by cancelling its request.
func drain(body io.Reader, cancel context.CancelFunc) {
	t := time.AfterFunc(drainWait, cancel)
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, drainBytes)
}

// assembly gathers the fragments of a stream's first choice into the
// message they make.
type assembly struct {
	model   string
	usage   *chat.Usage
	choice  bool // a chunk held the first choice
	text    strings.Builder
	refusal strings.Builder
	calls   []streamCall
	finish  string
}

// streamCall is a tool call being gathered.
type streamCall struct {
	// index is the call's index in the chunks; its place in calls is its
	// place in the answer.
	index int
	// id is the id the server gave, or the one Sample would make up; made
	// tells which.
	id   string
	made bool
	name string
	args []byte
}

// add takes in one chunk, emitting its fragments.
func (a *assembly) add(c *chat.Chunk, emit func(sampler.Delta)) {
	if c.Model != "" {
		a.model = c.Model
	}
	if c.Usage != nil {
		a.usage = c.Usage
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			// One choice is asked for.
			continue
		}
		a.choice = true
		d := &ch.Delta
		if d.Content != nil && *d.Content != "" {
			a.text.WriteString(*d.Content)
			emit(sampler.Delta{Text: *d.Content})
		}
		if d.Refusal != nil && *d.Refusal != "" {
			a.refusal.WriteString(*d.Refusal)
			emit(sampler.Delta{Text: *d.Refusal})
		}
		for j := range d.ToolCalls {
			a.addCall(&d.ToolCalls[j], emit)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.finish = *ch.FinishReason
		}
	}
}

// addCall takes in a fragment of a tool call. Fragments are keyed by
// index; a fragment with an id other than its index's call's starts a new
// call, for servers that send whole calls all at index 0. The first
// fragment of a call, and each that carries arguments, is emitted.
func (a *assembly) addCall(tc *chat.ToolCallChunk, emit func(sampler.Delta)) {
	k := -1
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i].index == tc.Index {
			k = i
			break
		}
	}
	if k >= 0 && tc.ID != "" && !a.calls[k].made && tc.ID != a.calls[k].id {
		k = -1
	}
	start := k < 0
	if start {
		k = len(a.calls)
		a.calls = append(a.calls, streamCall{index: tc.Index, id: tc.ID})
		if tc.ID == "" {
			a.calls[k].id, a.calls[k].made = fallbackCallID(k), true
		}
	}
	call := &a.calls[k]
	if call.made && tc.ID != "" {
		call.id, call.made = tc.ID, false
	}
	if call.name == "" {
		call.name = tc.Function.Name
	}
	call.args = append(call.args, tc.Function.Arguments...)
	if start || tc.Function.Arguments != "" {
		emit(sampler.Delta{ToolCall: &sampler.ToolCallDelta{Index: k, ID: call.id, Name: call.name, Arguments: tc.Function.Arguments}})
	}
}

// response maps the gathered message as decodeResponse maps a whole reply.
func (a *assembly) response(p *Provider, status int) (*sampler.Response, error) {
	cr := chat.Response{Model: a.model, Usage: a.usage}
	if a.choice {
		msg := chat.ResponseMessage{Role: chat.RoleAssistant}
		if a.text.Len() > 0 {
			msg.Content = chat.Text(a.text.String())
		}
		if a.refusal.Len() > 0 {
			refusal := a.refusal.String()
			msg.Refusal = &refusal
		}
		if len(a.calls) > 0 {
			msg.ToolCalls = make([]chat.ToolCall, len(a.calls))
			for i, c := range a.calls {
				msg.ToolCalls[i] = chat.ToolCall{ID: c.id, Type: chat.TypeFunction,
					Function: chat.FunctionCall{Name: c.name, Arguments: string(c.args)}}
			}
		}
		cr.Choices = []chat.Choice{{Message: msg, FinishReason: a.finish}}
	}
	return p.decodeResponse(status, &cr)
}
