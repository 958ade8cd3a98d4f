package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

// schemaName names the response format; OpenAI requires a name.
const schemaName = "response"

// includeUsage is the stream_options of every streamed request; requests
// share it and nothing modifies it.
var includeUsage = chat.StreamOptions{IncludeUsage: true}

// encodeRequest returns the JSON body for req, streamed or not, or a
// *sampler.InvalidError for content the Chat Completions API cannot carry.
func (p *Provider) encodeRequest(req *sampler.Request, stream bool) ([]byte, error) {
	cr := chat.Request{
		Model: req.Model,
		// One message per message, and the system prompt; tool results
		// add one each.
		Messages:    make([]chat.Message, 0, len(req.Messages)+1),
		Temperature: req.Temperature,
		Stop:        req.StopSequences,
		// Metadata is not sent: OpenAI accepts it only with store:true.
	}
	// The pointers into req below are read only by json.Marshal, before
	// encodeRequest returns.
	if req.MaxTokens != 0 {
		// max_completion_tokens, not max_tokens, which reasoning models
		// refuse.
		cr.MaxCompletionTokens = &req.MaxTokens
	}
	if req.SystemPrompt != "" {
		cr.Messages = append(cr.Messages, chat.Message{Role: chat.RoleSystem, Content: chat.Content{Text: &req.SystemPrompt}})
	}
	for i := range req.Messages {
		var err error
		if cr.Messages, err = p.appendMessage(cr.Messages, i, &req.Messages[i]); err != nil {
			return nil, err
		}
	}
	if len(req.Tools) > 0 {
		cr.Tools = make([]chat.Tool, len(req.Tools))
		for i, t := range req.Tools {
			cr.Tools[i] = chat.Tool{Type: chat.TypeFunction,
				Function: chat.FunctionDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}}
		}
	}
	if tc := req.ToolChoice; tc != nil && tc.Mode != "" && len(req.Tools) > 0 {
		switch tc.Mode {
		case sampler.ToolChoiceTool:
			cr.ToolChoice = &chat.ToolChoice{Mode: chat.TypeFunction, Function: tc.Name}
		default:
			// auto, required and none are OpenAI's own spellings.
			cr.ToolChoice = &chat.ToolChoice{Mode: tc.Mode}
		}
	}
	if tc := req.ToolChoice; !tc.Parallel() && len(req.Tools) > 0 && tc.EffectiveMode() != sampler.ToolChoiceNone {
		off := false
		cr.ParallelToolCalls = &off
	}
	if len(req.Schema) > 0 {
		// strict is always sent, false included: a compatible server's
		// default may differ from OpenAI's.
		strict := p.strict.compatible(req.Schema)
		cr.ResponseFormat = &chat.ResponseFormat{Type: chat.FormatJSONSchema,
			JSONSchema: &chat.JSONSchema{Name: schemaName, Schema: req.Schema, Strict: &strict}}
	}
	if stream {
		// The last chunk then carries the usage, which Sample reads from
		// the whole reply.
		cr.Stream = true
		cr.StreamOptions = &includeUsage
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
func (p *Provider) appendMessage(out []chat.Message, i int, m *sampler.Message) ([]chat.Message, error) {
	switch {
	case m.Role == sampler.RoleAssistant:
		return p.appendAssistant(out, i, m)
	case len(m.Content) == 1 && m.Content[0].Type == sampler.BlockText:
		// The common case, without a part to build or a string to copy,
		// and on a small stack: the other cases are functions of their own.
		return append(out, chat.Message{Role: chat.RoleUser, Content: chat.Content{Text: &m.Content[0].Text}}), nil
	}
	return p.appendUser(out, i, m)
}

// contentPath is the JSON Pointer of block j of message i.
func contentPath(i, j int) string { return fmt.Sprintf("/messages/%d/content/%d", i, j) }

// appendAssistant appends assistant message i as appendMessage says.
func (p *Provider) appendAssistant(out []chat.Message, i int, m *sampler.Message) ([]chat.Message, error) {
	var texts []string
	var calls []chat.ToolCall
	for j, c := range m.Content {
		switch c.Type {
		case sampler.BlockText:
			texts = append(texts, c.Text)
		case sampler.BlockToolUse:
			args := "{}"
			if len(c.Input) > 0 {
				args = string(sampler.CompactJSON(c.Input))
			}
			calls = append(calls, chat.ToolCall{ID: c.ID, Type: chat.TypeFunction,
				Function: chat.FunctionCall{Name: c.Name, Arguments: args}})
		default:
			return nil, sampler.Invalid(contentPath(i, j), "provider %s does not accept %s content in assistant messages", p.name, c.Type)
		}
	}
	msg := chat.Message{Role: chat.RoleAssistant, ToolCalls: calls}
	switch {
	case len(calls) > 0 && strings.Join(texts, "") == "":
		// content null: the message only calls tools.
	case len(texts) == 0:
		msg.Content = chat.Text("")
	case len(texts) == 1:
		msg.Content = chat.Text(texts[0])
	default:
		msg.Content = chat.Content{Parts: textParts(texts)}
	}
	return append(out, msg), nil
}

// appendUser appends user message i as appendMessage says.
func (p *Provider) appendUser(out []chat.Message, i int, m *sampler.Message) ([]chat.Message, error) {
	var parts []chat.Part
	for j, c := range m.Content {
		switch c.Type {
		case sampler.BlockToolResult:
			out = append(out, chat.Message{Role: chat.RoleTool, ToolCallID: c.ToolUseID, Content: chat.Text(toolResultText(c))})
		case sampler.BlockText:
			text := c.Text
			parts = append(parts, chat.Part{Type: chat.PartText, Text: &text})
		case sampler.BlockImage:
			parts = append(parts, chat.Part{Type: chat.PartImageURL,
				ImageURL: &chat.ImageURL{URL: "data:" + c.MIMEType + ";base64," + c.Data}})
		case sampler.BlockAudio:
			format := audioFormat(c.MIMEType)
			if format == "" {
				return nil, sampler.Invalid(contentPath(i, j), "provider %s does not accept audio of type %s", p.name, c.MIMEType)
			}
			parts = append(parts, chat.Part{Type: chat.PartInputAudio, InputAudio: &chat.InputAudio{Data: c.Data, Format: format}})
		default:
			return nil, sampler.Invalid(contentPath(i, j), "provider %s does not accept %s content in user messages", p.name, c.Type)
		}
	}
	switch {
	case len(parts) == 0:
	case len(parts) == 1 && parts[0].Type == chat.PartText:
		out = append(out, chat.Message{Role: chat.RoleUser, Content: chat.Text(*parts[0].Text)})
	default:
		out = append(out, chat.Message{Role: chat.RoleUser, Content: chat.Content{Parts: parts}})
	}
	return out, nil
}

func textParts(texts []string) []chat.Part {
	parts := make([]chat.Part, len(texts))
	for i := range texts {
		parts[i] = chat.Part{Type: chat.PartText, Text: &texts[i]}
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
