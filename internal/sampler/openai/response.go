package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// errorReply is the body of an error reply in OpenAI's documented shape,
// {"error": {"message", "type", "param", "code"}}.
type errorReply struct {
	Error *errorObject `json:"error"`
}

// errorObject is the error of an error reply, or of a stream chunk, as
// OpenAI and compatible servers write it.
type errorObject struct {
	// Message is a string; some servers send an array of strings.
	Message json.RawMessage `json:"message"`
	Type    string          `json:"type"`
	Param   *string         `json:"param"`
	// Code is a string, a number or null.
	Code json.RawMessage `json:"code"`
}

// APIError is the error object of an OpenAI error reply, with the API key
// removed from its texts. It is the Err of the *sampler.UpstreamError that
// Sample returns for such a reply.
type APIError struct {
	Message string
	// Type and Code classify the error, e.g. "invalid_request_error" and
	// "invalid_api_key"; Param names the offending request field. Each is
	// "" when the reply has none.
	Type, Code, Param string
}

// Error returns the message, then the type, code and param that are set.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	for _, f := range []struct{ name, value string }{{"type", e.Type}, {"code", e.Code}, {"param", e.Param}} {
		if f.value != "" {
			fmt.Fprintf(&b, " (%s %s)", f.name, f.value)
		}
	}
	return b.String()
}

// invalidArgumentsKey holds the original text of tool-call arguments that
// are not a JSON object. MCP's tool_use input must be an object, so the text
// is kept under this key; no inputSchema declares it, which makes the
// guaranteed tools helper reject the call and ask for a corrected one.
const invalidArgumentsKey = "_invalid_arguments"

// decodeResponse maps the first choice of a chat completion to a
// sampler.Response; status is the reply's HTTP status. Stream assembles
// its chunks into a chat.Response and maps it here too, so that a streamed
// answer and a whole one give equal Responses.
func (p *Provider) decodeResponse(status int, resp *chat.Response) (*sampler.Response, error) {
	if len(resp.Choices) == 0 {
		msg := "the reply has no choices"
		if e := replyError(resp.Error); e != "" {
			msg = "the reply is an error: " + p.redact.String(e)
		}
		return nil, &sampler.UpstreamError{Provider: p.name, Status: status, Message: msg}
	}
	choice := &resp.Choices[0]
	msg := &choice.Message
	var content []sampler.Content
	if text := msg.Content.String(); text != "" {
		content = append(content, sampler.TextBlock(text))
	}
	stop := stopReason(choice.FinishReason)
	if msg.Refusal != nil && *msg.Refusal != "" {
		content = append(content, sampler.TextBlock(*msg.Refusal))
		stop = sampler.StopRefusal
	}
	for i, call := range msg.ToolCalls {
		id := call.ID
		if id == "" {
			// Some compatible servers leave ids out; MCP needs one to pair
			// the tool_result with.
			id = fallbackCallID(i)
		}
		content = append(content, sampler.Content{Type: sampler.BlockToolUse, ID: id, Name: call.Function.Name,
			Input: toolInput(call.Function.Arguments)})
	}
	if len(msg.ToolCalls) > 0 && stop == sampler.StopEndTurn {
		// Compatible servers (older Ollama) finish tool calls with "stop".
		stop = sampler.StopToolUse
	}
	out := &sampler.Response{Model: resp.Model, Content: content, StopReason: stop}
	if u := resp.Usage; u != nil {
		out.Usage = sampler.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
		if d := u.PromptTokensDetails; d != nil {
			out.Usage.CachedInputTokens = d.CachedTokens
		}
	}
	return out, nil
}

// fallbackCallID is the id of call i of an answer that gave it none.
func fallbackCallID(i int) string { return "call_" + strconv.Itoa(i) }

// stopReason maps OpenAI's finish_reason to MCP's stopReason; unknown
// reasons pass through unchanged.
func stopReason(r string) string {
	switch r {
	case chat.FinishStop:
		return sampler.StopEndTurn
	case chat.FinishLength:
		return sampler.StopMaxTokens
	case chat.FinishToolCalls, chat.FinishFunctionCall:
		return sampler.StopToolUse
	case chat.FinishContentFilter:
		return sampler.StopRefusal
	}
	return r
}

// toolInput returns tool-call arguments as an MCP tool_use input: the
// compacted object when the arguments are a JSON object, {} when they are
// empty, and otherwise {"_invalid_arguments": "<original text>"}.
func toolInput(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage("{}")
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		return json.RawMessage(sampler.CompactJSON([]byte(trimmed)))
	}
	b, _ := json.Marshal(map[string]string{invalidArgumentsKey: args})
	return b
}

// transportError turns a failure to send the request or read the reply
// into a *sampler.UpstreamError whose message and chain are free of the
// API key: the caller's cancellation, a timeout (the caller's deadline or
// the transport's), or a connection failure (Status 0).
func (p *Provider) transportError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	ue := &sampler.UpstreamError{Provider: p.name}
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		ue.Message, ue.Err = "cancelled", err
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		ue.Timeout, ue.Message, ue.Err = true, "no answer in time", p.redact.Error(err)
	default:
		ue.Message, ue.Err = p.redact.String(err.Error()), p.redact.Error(err)
	}
	return ue
}

// statusError turns a reply with a status other than 2xx into a
// *sampler.UpstreamError with the status, the Retry-After hint and the
// message of OpenAI's error object, or the start of the body when it is not
// one; the API key is removed from every text.
func (p *Provider) statusError(resp *http.Response) error {
	ue := &sampler.UpstreamError{Provider: p.name, Status: resp.StatusCode}
	if d, ok := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		ue.RetryAfter = d
	}
	// A body cut short by a failed read is described as far as it came.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var er errorReply
	if json.Unmarshal(body, &er) != nil || er.Error == nil {
		ue.Message = p.bodyMessage(resp.StatusCode, body)
		return ue
	}
	ae := p.apiError(er.Error)
	ue.Message, ue.Err = ae.Message, ae
	if ue.Message == "" {
		ue.Message = http.StatusText(resp.StatusCode)
	}
	return ue
}

// apiError returns e with the API key removed from its texts.
func (p *Provider) apiError(e *errorObject) *APIError {
	ae := &APIError{Message: p.redact.String(errorMessage(e.Message)), Type: p.redact.String(e.Type),
		Code: p.redact.String(jsonScalar(e.Code))}
	if e.Param != nil {
		ae.Param = p.redact.String(*e.Param)
	}
	return ae
}

// errorMessage returns the message of an error object: a string, or the
// strings of an array joined with ", ".
func errorMessage(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ", ")
	}
	return ""
}

// replyError returns the message of a reply's error member: an error
// object's message, or the member itself when it is text; "" otherwise.
func replyError(raw json.RawMessage) string {
	var obj struct {
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != nil {
		return errorMessage(obj.Message)
	}
	return errorMessage(raw)
}

// jsonScalar returns a JSON string's value, "" for null or nothing, and
// any other value (a number) as written.
func jsonScalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}

// bodyMessage describes an error reply that is not OpenAI's error JSON:
// its status text and the start of its body, on one line.
func (p *Provider) bodyMessage(status int, body []byte) string {
	msg := http.StatusText(status)
	if msg == "" {
		msg = fmt.Sprintf("status %d", status)
	}
	// The key is removed from the text as shown, after the bytes that are
	// not UTF-8 are dropped (one inside the key would hide it) and before
	// the cut (which could leave a part of it).
	b := p.redact.String(strings.Join(strings.Fields(string(bytes.ToValidUTF8(body, nil))), " "))
	const limit = 200
	if len(b) > limit {
		b = strings.ToValidUTF8(b[:limit], "") + "…"
	}
	if b != "" {
		msg += ": " + b
	}
	return msg
}
