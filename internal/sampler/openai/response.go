package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// invalidArgumentsKey holds the original text of tool-call arguments that
// are not a JSON object. MCP's tool_use input must be an object, so the text
// is kept under this key; no inputSchema declares it, which makes the
// guaranteed tools helper reject the call and ask for a corrected one.
const invalidArgumentsKey = "_invalid_arguments"

// decodeResponse maps the first choice of a chat completion to a
// sampler.Response.
func (p *Provider) decodeResponse(x *exchange, resp *goopenai.ChatCompletionResponse) (*sampler.Response, error) {
	if len(resp.Choices) == 0 {
		return nil, &sampler.UpstreamError{Provider: p.name, Status: x.status, Message: "the reply has no choices"}
	}
	choice := resp.Choices[0]
	msg := choice.Message
	var content []sampler.Content
	text := msg.Content
	if text == "" {
		// Some compatible servers answer with content parts.
		var texts []string
		for _, part := range msg.MultiContent {
			if part.Type == goopenai.ChatMessagePartTypeText {
				texts = append(texts, part.Text)
			}
		}
		text = strings.Join(texts, "")
	}
	if text != "" {
		content = append(content, sampler.TextBlock(text))
	}
	stop := stopReason(choice.FinishReason)
	if msg.Refusal != "" {
		content = append(content, sampler.TextBlock(msg.Refusal))
		stop = sampler.StopRefusal
	}
	for i, call := range msg.ToolCalls {
		id := call.ID
		if id == "" {
			// Some compatible servers leave ids out; MCP needs one to pair
			// the tool_result with.
			id = fmt.Sprintf("call_%d", i)
		}
		content = append(content, sampler.Content{Type: sampler.BlockToolUse, ID: id, Name: call.Function.Name,
			Input: toolInput(call.Function.Arguments)})
	}
	if len(msg.ToolCalls) > 0 && stop == sampler.StopEndTurn {
		// Compatible servers (older Ollama) finish tool calls with "stop".
		stop = sampler.StopToolUse
	}
	return &sampler.Response{
		Model:      resp.Model,
		Content:    content,
		StopReason: stop,
		Usage:      sampler.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens},
	}, nil
}

// stopReason maps OpenAI's finish_reason to MCP's stopReason; unknown
// reasons pass through unchanged.
func stopReason(r goopenai.FinishReason) string {
	switch r {
	case goopenai.FinishReasonStop:
		return sampler.StopEndTurn
	case goopenai.FinishReasonLength:
		return sampler.StopMaxTokens
	case goopenai.FinishReasonToolCalls, goopenai.FinishReasonFunctionCall:
		return sampler.StopToolUse
	case goopenai.FinishReasonContentFilter:
		return sampler.StopRefusal
	case goopenai.FinishReasonNull:
		return ""
	}
	return string(r)
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

// upstreamError turns a failed call into a *sampler.UpstreamError whose
// message and chain are free of the API key.
func (p *Provider) upstreamError(ctx context.Context, x *exchange, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	ue := &sampler.UpstreamError{Provider: p.name}
	var (
		apiErr *goopenai.APIError
		reqErr *goopenai.RequestError
		netErr net.Error
	)
	isNet := errors.As(err, &netErr)
	switch {
	case errors.As(err, &apiErr):
		c := *apiErr
		c.Message = p.redact.String(c.Message)
		if c.Param != nil {
			param := p.redact.String(*c.Param)
			c.Param = &param
		}
		ue.Status, ue.Message, ue.Err = c.HTTPStatusCode, c.Message, &c
		if ue.Message == "" {
			ue.Message = http.StatusText(ue.Status)
		}
	case errors.As(err, &reqErr):
		c := *reqErr
		c.Body = []byte(p.redact.String(string(c.Body)))
		if c.Err != nil {
			c.Err = p.redact.Error(c.Err)
		}
		ue.Status, ue.Message, ue.Err = c.HTTPStatusCode, p.bodyMessage(c.HTTPStatusCode, c.Body), &c
	case errors.Is(err, context.Canceled):
		ue.Message, ue.Err = "cancelled", err
	case errors.Is(err, context.DeadlineExceeded), isNet && netErr.Timeout():
		ue.Timeout, ue.Message, ue.Err = true, "no answer in time", p.redact.Error(err)
	case x.status != 0 && !isNet:
		// The upstream answered, but not with a reply we can read. A
		// network failure while reading it is a connection error below.
		ue.Status, ue.Message, ue.Err = x.status, "unreadable reply: "+p.redact.String(err.Error()), p.redact.Error(err)
	default:
		ue.Message, ue.Err = p.redact.String(err.Error()), p.redact.Error(err)
	}
	if ue.Status != 0 && x.retryAfter != "" {
		if d, ok := retry.ParseRetryAfter(x.retryAfter, time.Now()); ok {
			ue.RetryAfter = d
		}
	}
	return ue
}

// bodyMessage describes an error reply that is not OpenAI's error JSON:
// its status text and the start of its body, on one line.
func (p *Provider) bodyMessage(status int, body []byte) string {
	msg := http.StatusText(status)
	if msg == "" {
		msg = fmt.Sprintf("status %d", status)
	}
	b := strings.Join(strings.Fields(string(bytes.ToValidUTF8(body, nil))), " ")
	const limit = 200
	if len(b) > limit {
		b = strings.ToValidUTF8(b[:limit], "") + "…"
	}
	if b != "" {
		msg += ": " + b
	}
	return msg
}
