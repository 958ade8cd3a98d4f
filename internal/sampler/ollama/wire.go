package ollama

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sampled/sampled/internal/sampler"
)

// Wire shapes of POST /api/chat (github.com/ollama/ollama docs/api.md).

type chatRequest struct {
	Model    string          `json:"model"`
	Messages []chatMessage   `json:"messages"`
	Tools    []chatTool      `json:"tools,omitempty"`
	Format   json.RawMessage `json:"format,omitempty"`
	Options  *chatOptions    `json:"options,omitempty"`
	Stream   bool            `json:"stream"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	Images    []string       `json:"images,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
	ToolName  string         `json:"tool_name,omitempty"`
}

type chatToolCall struct {
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatOptions struct {
	Temperature *float64 `json:"temperature,omitempty"`
	NumPredict  int      `json:"num_predict,omitempty"`
	Stop        []string `json:"stop,omitempty"`
}

type chatResponse struct {
	Model           string      `json:"model"`
	Message         chatMessage `json:"message"`
	Done            bool        `json:"done"`
	DoneReason      string      `json:"done_reason"`
	PromptEvalCount int         `json:"prompt_eval_count"`
	EvalCount       int         `json:"eval_count"`
	Error           string      `json:"error"`
}

// Ollama's message roles.
const (
	roleSystem    = "system"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// buildRequest maps req to the body of POST /api/chat. A request Ollama
// cannot express is a *sampler.InvalidError naming the offending path.
func buildRequest(req *sampler.Request) (*chatRequest, error) {
	out := &chatRequest{Model: req.Model, Messages: []chatMessage{}}
	if req.SystemPrompt != "" {
		out.Messages = append(out.Messages, chatMessage{Role: roleSystem, Content: req.SystemPrompt})
	}
	for i, m := range req.Messages {
		var prev *sampler.Message
		if i > 0 {
			prev = &req.Messages[i-1]
		}
		msgs, err := mapMessage(i, &m, prev)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	tools, err := selectTools(req.Tools, req.ToolChoice)
	if err != nil {
		return nil, err
	}
	out.Tools = tools
	if len(req.Schema) > 0 {
		out.Format = req.Schema
	}
	opts := chatOptions{Temperature: req.Temperature, Stop: req.StopSequences}
	if req.MaxTokens > 0 {
		opts.NumPredict = req.MaxTokens
	}
	if opts.Temperature != nil || opts.NumPredict != 0 || len(opts.Stop) > 0 {
		out.Options = &opts
	}
	return out, nil
}

// mapMessage maps message i. A user message's tool_result blocks become
// one role:"tool" message each, named after the tool_use of prev they
// answer; its text and images, if any, follow in a user message. An
// assistant message keeps its text and turns tool_use blocks into
// tool_calls.
func mapMessage(i int, m, prev *sampler.Message) ([]chatMessage, error) {
	at := fmt.Sprintf("/messages/%d", i)
	role := roleUser
	if m.Role == sampler.RoleAssistant {
		role = roleAssistant
	}
	var (
		out   []chatMessage
		texts []string
		msg   = chatMessage{Role: role}
	)
	for j, c := range m.Content {
		bat := fmt.Sprintf("%s/content/%d", at, j)
		switch c.Type {
		case sampler.BlockText:
			texts = append(texts, c.Text)
		case sampler.BlockImage:
			msg.Images = append(msg.Images, c.Data)
		case sampler.BlockAudio:
			return nil, sampler.Invalid(bat, "provider ollama does not accept audio")
		case sampler.BlockToolUse:
			msg.ToolCalls = append(msg.ToolCalls, chatToolCall{Function: chatFunctionCall{Name: c.Name, Arguments: objectOrEmpty(c.Input)}})
		case sampler.BlockToolResult:
			name := toolNameOf(prev, c.ToolUseID)
			if name == "" {
				return nil, sampler.Invalid(bat+"/toolUseId", "tool_result %q answers no tool_use of the previous assistant message", c.ToolUseID)
			}
			tm, err := toolMessage(bat, name, &c)
			if err != nil {
				return nil, err
			}
			out = append(out, tm)
		default:
			return nil, sampler.Invalid(bat+"/type", "provider ollama does not accept %s blocks in messages", c.Type)
		}
	}
	msg.Content = strings.Join(texts, "\n")
	if len(out) == 0 || len(texts) > 0 || len(msg.Images) > 0 || len(msg.ToolCalls) > 0 {
		out = append(out, msg)
	}
	return out, nil
}

// toolNameOf returns the name of the tool_use of prev with the given id,
// or "" when there is none.
func toolNameOf(prev *sampler.Message, id string) string {
	if prev == nil || prev.Role != sampler.RoleAssistant {
		return ""
	}
	for _, c := range prev.Content {
		if c.Type == sampler.BlockToolUse && c.ID == id {
			return c.Name
		}
	}
	return ""
}

// toolMessage maps one tool_result to a role:"tool" message: the text of
// its blocks (other blocks than text and image as their JSON), then its
// structuredContent as JSON unless a text block already holds that value
// (Content.StructuredText);
// images go to images; an error result is prefixed "Error: ".
func toolMessage(at, name string, c *sampler.Content) (chatMessage, error) {
	msg := chatMessage{Role: roleTool, ToolName: name}
	var parts []string
	for k, b := range c.Content {
		switch b.Type {
		case sampler.BlockText:
			parts = append(parts, b.Text)
		case sampler.BlockImage:
			msg.Images = append(msg.Images, b.Data)
		case sampler.BlockAudio:
			return chatMessage{}, sampler.Invalid(fmt.Sprintf("%s/content/%d", at, k), "provider ollama does not accept audio")
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				return chatMessage{}, sampler.Invalid(fmt.Sprintf("%s/content/%d", at, k), "cannot encode %s block: %v", b.Type, err)
			}
			parts = append(parts, string(raw))
		}
	}
	if st := c.StructuredText(); st != "" {
		parts = append(parts, st)
	}
	msg.Content = strings.Join(parts, "\n")
	if c.IsError != nil && *c.IsError {
		msg.Content = "Error: " + msg.Content
	}
	return msg, nil
}

// objectOrEmpty returns input when it is a JSON object, else {}: Ollama
// takes tool-call arguments only as an object. A non-object input can only
// come from a model's own invalid call being replayed for correction.
func objectOrEmpty(input json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(input)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage("{}")
}

// selectTools emulates tool choice, which Ollama lacks: none sends no
// tools, a named tool only that one, auto and required every tool.
func selectTools(tools []sampler.Tool, choice *sampler.ToolChoice) ([]chatTool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	switch choice.EffectiveMode() {
	case sampler.ToolChoiceNone:
		return nil, nil
	case sampler.ToolChoiceTool:
		for _, t := range tools {
			if t.Name == choice.Name {
				return []chatTool{wireTool(t)}, nil
			}
		}
		return nil, sampler.Invalid("/toolChoice/name", "toolChoice names tool %q, which is not declared in tools", choice.Name)
	}
	out := make([]chatTool, len(tools))
	for i, t := range tools {
		out[i] = wireTool(t)
	}
	return out, nil
}

func wireTool(t sampler.Tool) chatTool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	params := t.InputSchema
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	return chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: desc, Parameters: params}}
}

// toResponse maps Ollama's answer: its text (when not empty), then one
// tool_use block per tool call with a deterministic id, since Ollama has
// no call ids.
func toResponse(cr *chatResponse) *sampler.Response {
	resp := &sampler.Response{
		Model:      cr.Model,
		Content:    []sampler.Content{},
		StopReason: stopReason(cr),
		Usage:      sampler.Usage{InputTokens: cr.PromptEvalCount, OutputTokens: cr.EvalCount},
	}
	if cr.Message.Content != "" {
		resp.Content = append(resp.Content, sampler.TextBlock(cr.Message.Content))
	}
	for i, tc := range cr.Message.ToolCalls {
		args := arguments(tc.Function.Arguments)
		resp.Content = append(resp.Content, sampler.Content{
			Type:  sampler.BlockToolUse,
			ID:    callID(i, tc.Function.Name, args),
			Name:  tc.Function.Name,
			Input: args,
		})
	}
	return resp
}

// stopReason maps done_reason to MCP: tool calls present ⇒ toolUse, stop ⇒
// endTurn, length ⇒ maxTokens, others passed through. A finished answer
// without done_reason (older Ollama) counts as endTurn.
func stopReason(cr *chatResponse) string {
	switch {
	case len(cr.Message.ToolCalls) > 0:
		return sampler.StopToolUse
	case cr.DoneReason == "stop", cr.DoneReason == "" && cr.Done:
		return sampler.StopEndTurn
	case cr.DoneReason == "length":
		return sampler.StopMaxTokens
	default:
		return cr.DoneReason
	}
}

// arguments returns tool-call arguments compacted: an absent or null value
// is {}, and a JSON string holding an object is unwrapped. Anything else is
// kept, for the Service to reject against the tool's input schema.
func arguments(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage("{}")
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) == nil {
			if inner := bytes.TrimSpace([]byte(s)); len(inner) > 0 && inner[0] == '{' && json.Valid(inner) {
				t = inner
			}
		}
	}
	return json.RawMessage(sampler.CompactJSON(t))
}

// callID returns "call_<index>_<hash>", where hash is the first 8 hex
// digits of SHA-256 over the tool name and its compacted arguments: the
// same answer always gets the same ids.
func callID(index int, name string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(args)
	return fmt.Sprintf("call_%d_%s", index, hex.EncodeToString(h.Sum(nil))[:8])
}
