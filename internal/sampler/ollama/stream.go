package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sampled/sampled/internal/sampler"
)

var _ sampler.Streamer = (*Provider)(nil)

// errStreamTooLarge is a stream longer than maxSuccessBody.
var errStreamTooLarge = fmt.Errorf("response body exceeds %d MiB", maxSuccessBody>>20)

// Stream runs one streamed chat completion ("stream": true). Ollama
// answers with NDJSON, one chunk of the answer a line: each line's text is
// handed to emit as it arrives, and each tool call, which Ollama sends
// whole, as one fragment with the id Sample gives it. The last line says
// done:true and carries the stop reason and token counts; the Response is
// the one Sample returns for the same answer.
//
// Failures are classified as Sample's. A line {"error": …} is an upstream
// error with status 502, since the reply's status was sent before it; a
// stream that ends before its done line, or whose connection breaks, is
// one without status. The whole stream is bounded as Sample's reply is.
func (p *Provider) Stream(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (*sampler.Response, error) {
	resp, err := p.post(ctx, req, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()

	body := &boundedBody{r: resp.Body, left: maxSuccessBody}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxSuccessBody)
	// unended is set when the reply ends in a line without its newline:
	// the last line if the reply ended well, a cut one if it broke off.
	unended := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			unended = true
			return len(data), data, nil
		}
		return 0, nil, nil
	})

	s := &chunks{p: p, status: resp.StatusCode, emit: emit}
	var last []byte
	for sc.Scan() {
		if unended {
			last = bytes.Clone(sc.Bytes())
			break
		}
		if done, err := s.line(sc.Bytes()); err != nil || done {
			return s.result(err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, p.streamError(ctx, err, resp.StatusCode)
	}
	if last != nil {
		if done, err := s.line(last); err != nil || done {
			return s.result(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, p.transportError(ctx, err)
	}
	return nil, &sampler.UpstreamError{Provider: p.name, Message: "the stream ended before its done line"}
}

// streamError classifies a failure to read a stream: too large, as Sample
// says it, or a transport failure, which once the stream has begun is a
// connection that broke off.
func (p *Provider) streamError(ctx context.Context, err error, status int) error {
	switch {
	case errors.Is(err, sampler.ErrReplyTooLarge):
		return &sampler.UpstreamError{Provider: p.name, Status: status, Message: err.Error()}
	case errors.Is(err, errStreamTooLarge), errors.Is(err, bufio.ErrTooLong):
		return &sampler.UpstreamError{Provider: p.name, Status: status, Message: errStreamTooLarge.Error()}
	}
	ue := p.transportError(ctx, err)
	if ctx.Err() == nil && !ue.Timeout {
		ue.Message = "the connection broke off mid-stream"
	}
	return ue
}

// chunks gathers the lines of a stream into the whole answer, emitting
// their fragments.
type chunks struct {
	p      *Provider
	status int
	emit   func(sampler.Delta)
	// whole is the answer so far: the last line's fields, the text and
	// tool calls of all lines.
	whole chatResponse
	text  strings.Builder
}

// line takes one line of the stream and reports whether it was the last.
func (s *chunks) line(line []byte) (bool, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return false, nil
	}
	var cr chatResponse
	if err := json.Unmarshal(line, &cr); err != nil {
		return false, &sampler.UpstreamError{Provider: s.p.name, Status: s.status,
			Message: "malformed stream line", Err: err}
	}
	if cr.Error != "" {
		return false, &sampler.UpstreamError{Provider: s.p.name, Status: http.StatusBadGateway,
			Message: truncate(strings.TrimSpace(cr.Error))}
	}
	if t := cr.Message.Content; t != "" {
		s.text.WriteString(t)
		s.emit(sampler.Delta{Text: t})
	}
	for _, tc := range cr.Message.ToolCalls {
		i := len(s.whole.Message.ToolCalls)
		s.whole.Message.ToolCalls = append(s.whole.Message.ToolCalls, tc)
		args := arguments(tc.Function.Arguments)
		s.emit(sampler.Delta{ToolCall: &sampler.ToolCallDelta{Index: i, ID: callID(i, tc.Function.Name, args),
			Name: tc.Function.Name, Arguments: string(args)}})
	}
	if cr.Model != "" {
		s.whole.Model = cr.Model
	}
	if !cr.Done {
		return false, nil
	}
	s.whole.Done, s.whole.DoneReason = true, cr.DoneReason
	s.whole.PromptEvalCount, s.whole.EvalCount = cr.PromptEvalCount, cr.EvalCount
	return true, nil
}

// result returns the whole answer, or err.
func (s *chunks) result(err error) (*sampler.Response, error) {
	if err != nil {
		return nil, err
	}
	s.whole.Message.Role = roleAssistant
	s.whole.Message.Content = s.text.String()
	return toResponse(&s.whole), nil
}

// boundedBody reads at most one byte more than its limit, and fails with
// errStreamTooLarge once it has.
type boundedBody struct {
	r    io.Reader
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errStreamTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
