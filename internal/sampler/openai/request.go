package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/sampled/sampled/internal/sampler"
)

// chatRequest is the body of POST /chat/completions as this adapter sends
// it: the subset of OpenAI's CreateChatCompletionRequest it uses.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	// MaxCompletionTokens is the current field; max_tokens is deprecated
	// and refused by reasoning models.
	MaxCompletionTokens int        `json:"max_completion_tokens,omitempty"`
	Temperature         *float64   `json:"temperature,omitempty"`
	Stop                []string   `json:"stop,omitempty"`
	Tools               []chatTool `json:"tools,omitempty"`
	// ToolChoice is a string ("auto", "required", "none") or a
	// namedToolChoice.
	ToolChoice any `json:"tool_choice,omitempty"`
	// ParallelToolCalls false asks for at most one tool call; nil leaves
	// OpenAI's default (true).
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    *responseFormat `json:"response_format,omitempty"`
}

// chatMessage is one message of the request. Content is a string, a
// []contentPart or nil, which is written as null (an assistant message that
// only calls tools).
type chatMessage struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// toolCall is a function call of an assistant message, in a request and
// in a reply.
type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

// functionCall names the function of a toolCall; Arguments is a JSON text.
type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatTool declares one function the model may call.
type chatTool struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

// functionDef is a function's name, description and JSON Schema of its
// arguments.
type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// namedToolChoice forces a call of one function.
type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// responseFormat asks for an answer that matches a JSON Schema.
type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

// jsonSchema is the json_schema member of a responseFormat. Schema is
// sent as the client gave it, every keyword kept.
type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// contentPart is a text, image_url or input_audio part of a user message.
type contentPart struct {
	Type       string      `json:"type"`
	Text       *string     `json:"text,omitempty"`
	ImageURL   *imageURL   `json:"image_url,omitempty"`
	InputAudio *inputAudio `json:"input_audio,omitempty"`
}

// imageURL is the payload of an image_url part: here always a data URL.
type imageURL struct {
	URL string `json:"url"`
}

// inputAudio is the payload of an input_audio part.
type inputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

const (
	roleSystem    = "system"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"

	typeFunction   = "function"
	typeJSONSchema = "json_schema"

	partText       = "text"
	partImageURL   = "image_url"
	partInputAudio = "input_audio"

	// schemaName names the response format; OpenAI requires a name.
	schemaName = "response"
)

// encodeRequest returns the JSON body for req, or a *sampler.InvalidError
// for content the Chat Completions API cannot carry.
func (p *Provider) encodeRequest(req *sampler.Request) ([]byte, error) {
	cr := chatRequest{
		Model: req.Model,
		// One message per message, and the system prompt; tool results
		// add one each.
		Messages:            make([]chatMessage, 0, len(req.Messages)+1),
		MaxCompletionTokens: req.MaxTokens,
		Temperature:         req.Temperature,
		Stop:                req.StopSequences,
		// Metadata is not sent: OpenAI accepts it only with store:true.
	}
	if req.SystemPrompt != "" {
		cr.Messages = append(cr.Messages, chatMessage{Role: roleSystem, Content: req.SystemPrompt})
	}
	for i, m := range req.Messages {
		var err error
		if cr.Messages, err = p.appendMessage(cr.Messages, i, m); err != nil {
			return nil, err
		}
	}
	if len(req.Tools) > 0 {
		cr.Tools = make([]chatTool, len(req.Tools))
		for i, t := range req.Tools {
			cr.Tools[i] = chatTool{Type: typeFunction,
				Function: functionDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}}
		}
	}
	if tc := req.ToolChoice; tc != nil && tc.Mode != "" && len(req.Tools) > 0 {
		switch tc.Mode {
		case sampler.ToolChoiceTool:
			named := namedToolChoice{Type: typeFunction}
			named.Function.Name = tc.Name
			cr.ToolChoice = named
		default:
			// auto, required and none are OpenAI's own spellings.
			cr.ToolChoice = tc.Mode
		}
	}
	if tc := req.ToolChoice; !tc.Parallel() && len(req.Tools) > 0 && tc.EffectiveMode() != sampler.ToolChoiceNone {
		off := false
		cr.ParallelToolCalls = &off
	}
	if len(req.Schema) > 0 {
		cr.ResponseFormat = &responseFormat{Type: typeJSONSchema,
			JSONSchema: jsonSchema{Name: schemaName, Schema: req.Schema, Strict: p.strict.compatible(req.Schema)}}
	}
	body, err := json.Marshal(&cr)
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	return body, nil
}

// appendMessage appends message i, mapped to OpenAI messages, to out: a
// user message becomes one "tool" message per tool_result followed by a
// user message with the other blocks, if any; an assistant message becomes
// one assistant message with its text and tool calls.
func (p *Provider) appendMessage(out []chatMessage, i int, m sampler.Message) ([]chatMessage, error) {
	at := func(j int) string { return fmt.Sprintf("/messages/%d/content/%d", i, j) }
	if m.Role == sampler.RoleAssistant {
		var texts []string
		var calls []toolCall
		for j, c := range m.Content {
			switch c.Type {
			case sampler.BlockText:
				texts = append(texts, c.Text)
			case sampler.BlockToolUse:
				args := "{}"
				if len(c.Input) > 0 {
					args = string(sampler.CompactJSON(c.Input))
				}
				calls = append(calls, toolCall{ID: c.ID, Type: typeFunction,
					Function: functionCall{Name: c.Name, Arguments: args}})
			default:
				return nil, sampler.Invalid(at(j), "provider %s does not accept %s content in assistant messages", p.name, c.Type)
			}
		}
		msg := chatMessage{Role: roleAssistant, ToolCalls: calls}
		switch {
		case len(calls) > 0 && strings.Join(texts, "") == "":
			// content null: the message only calls tools.
		case len(texts) == 0:
			msg.Content = ""
		case len(texts) == 1:
			msg.Content = texts[0]
		default:
			msg.Content = textParts(texts)
		}
		return append(out, msg), nil
	}
	if len(m.Content) == 1 && m.Content[0].Type == sampler.BlockText {
		// The common case, without a part to build.
		return append(out, chatMessage{Role: roleUser, Content: m.Content[0].Text}), nil
	}
	var parts []contentPart
	for j, c := range m.Content {
		switch c.Type {
		case sampler.BlockToolResult:
			out = append(out, chatMessage{Role: roleTool, ToolCallID: c.ToolUseID, Content: toolResultText(c)})
		case sampler.BlockText:
			text := c.Text
			parts = append(parts, contentPart{Type: partText, Text: &text})
		case sampler.BlockImage:
			parts = append(parts, contentPart{Type: partImageURL,
				ImageURL: &imageURL{URL: "data:" + c.MIMEType + ";base64," + c.Data}})
		case sampler.BlockAudio:
			format := audioFormat(c.MIMEType)
			if format == "" {
				return nil, sampler.Invalid(at(j), "provider %s does not accept audio of type %s", p.name, c.MIMEType)
			}
			parts = append(parts, contentPart{Type: partInputAudio, InputAudio: &inputAudio{Data: c.Data, Format: format}})
		default:
			return nil, sampler.Invalid(at(j), "provider %s does not accept %s content in user messages", p.name, c.Type)
		}
	}
	switch {
	case len(parts) == 0:
	case len(parts) == 1 && parts[0].Type == partText:
		out = append(out, chatMessage{Role: roleUser, Content: *parts[0].Text})
	default:
		out = append(out, chatMessage{Role: roleUser, Content: parts})
	}
	return out, nil
}

func textParts(texts []string) []contentPart {
	parts := make([]contentPart, len(texts))
	for i := range texts {
		parts[i] = contentPart{Type: partText, Text: &texts[i]}
	}
	return parts
}

// audioFormat returns OpenAI's input_audio format for a MIME type: "wav",
// "mp3", or "" for types it does not accept.
func audioFormat(mime string) string {
	mt, _, _ := strings.Cut(mime, ";")
	switch strings.ToLower(strings.TrimSpace(mt)) {
	case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave":
		return "wav"
	case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg-3":
		return "mp3"
	}
	return ""
}

// toolResultText flattens an MCP tool_result into the string content of an
// OpenAI tool message: the text of its blocks joined by newlines, then its
// structuredContent as JSON unless a text block already holds it
// (Content.StructuredText). OpenAI has
// no is_error field, so an error result is prefixed with "Error: ".
// Non-text blocks, which tool messages cannot carry, are named in brackets.
func toolResultText(c sampler.Content) string {
	var lines []string
	for _, b := range c.Content {
		switch b.Type {
		case sampler.BlockText:
			lines = append(lines, b.Text)
		case sampler.BlockResourceLink:
			lines = append(lines, fmt.Sprintf("[resource link: %s]", stringMember(b.Extra["uri"])))
		case sampler.BlockResource:
			var res struct {
				URI  string  `json:"uri"`
				Text *string `json:"text"`
			}
			_ = json.Unmarshal(b.Extra["resource"], &res)
			if res.Text != nil {
				lines = append(lines, *res.Text)
			} else {
				lines = append(lines, fmt.Sprintf("[resource %s omitted: tool messages carry text only]", res.URI))
			}
		default:
			lines = append(lines, fmt.Sprintf("[%s content of type %s omitted: tool messages carry text only]", b.Type, b.MIMEType))
		}
	}
	if st := c.StructuredText(); st != "" {
		lines = append(lines, st)
	}
	text := strings.Join(lines, "\n")
	if c.IsError != nil && *c.IsError {
		text = "Error: " + text
	}
	return text
}

func stringMember(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// maxStrictCache bounds the entries of a strictCache.
const maxStrictCache = 4096

// strictCache remembers strictCompatible's answer for the schemas a
// Provider sent lately, by a 64-bit hash of their text: clients send the
// same schema call after call, and a corrective attempt sends it again,
// while the answer costs a decode of the whole schema. A full cache starts
// over. Two schemas whose texts collide in 64 bits would share an answer;
// the Service validates every answer either way.
type strictCache struct {
	seed maphash.Seed
	mu   sync.RWMutex
	m    map[uint64]bool
}

func newStrictCache() *strictCache {
	return &strictCache{seed: maphash.MakeSeed(), m: make(map[uint64]bool)}
}

// compatible returns strictCompatible(schema), from the cache when it can.
func (c *strictCache) compatible(schema json.RawMessage) bool {
	h := maphash.Bytes(c.seed, schema)
	c.mu.RLock()
	ok, found := c.m[h]
	c.mu.RUnlock()
	if found {
		return ok
	}
	ok = strictCompatible(schema)
	c.mu.Lock()
	if len(c.m) >= maxStrictCache {
		clear(c.m)
	}
	c.m[h] = ok
	c.mu.Unlock()
	return ok
}

// strictCompatible reports whether schema already satisfies the rules of
// OpenAI's strict structured outputs, so that strict:true cannot change its
// meaning: the root is an object schema without anyOf; every object schema,
// recursively through properties, items, $defs, definitions and anyOf, has
// additionalProperties:false and lists all its properties in required; and
// no keyword strict mode refuses (allOf, oneOf, not, if/then/else,
// minLength, uniqueItems, …) appears. Anything else is sent with
// strict:false; the Service validates the answer either way.
func strictCompatible(schema json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return false
	}
	m, ok := root.(map[string]any)
	if !ok || !isObjectSchema(m) {
		return false
	}
	if _, ok := m["anyOf"]; ok {
		return false
	}
	return strictNode(m)
}

func strictNode(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		// Boolean schemas have no place in strict mode.
		return false
	}
	for k := range m {
		switch k {
		case "allOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
			"patternProperties", "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties",
			"unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
			"minLength", "maxLength":
			return false
		}
	}
	if isObjectSchema(m) {
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			return false
		}
		props, _ := m["properties"].(map[string]any)
		required := map[string]bool{}
		list, _ := m["required"].([]any)
		for _, r := range list {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
		for name := range props {
			if !required[name] {
				return false
			}
		}
	}
	for _, k := range []string{"properties", "$defs", "definitions"} {
		sub, ok := m[k]
		if !ok {
			continue
		}
		subs, ok := sub.(map[string]any)
		if !ok {
			return false
		}
		for _, s := range subs {
			if !strictNode(s) {
				return false
			}
		}
	}
	if items, ok := m["items"]; ok && !strictNode(items) {
		return false
	}
	if anyOf, ok := m["anyOf"]; ok {
		list, ok := anyOf.([]any)
		if !ok {
			return false
		}
		for _, s := range list {
			if !strictNode(s) {
				return false
			}
		}
	}
	return true
}

// isObjectSchema reports whether m describes objects: its type is or
// includes "object", or it has no type but has properties.
func isObjectSchema(m map[string]any) bool {
	switch t := m["type"].(type) {
	case string:
		return t == "object"
	case []any:
		for _, x := range t {
			if x == "object" {
				return true
			}
		}
		return false
	case nil:
		_, ok := m["properties"]
		return ok
	}
	return false
}
