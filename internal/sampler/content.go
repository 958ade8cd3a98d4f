package sampler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"
)

// Role is the author of a message: RoleUser or RoleAssistant.
type Role string

// The two roles of MCP's SamplingMessage.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Content block types of MCP 2025-11-25. Tool results may also carry
// BlockResourceLink and BlockResource blocks.
const (
	BlockText         = "text"
	BlockImage        = "image"
	BlockAudio        = "audio"
	BlockToolUse      = "tool_use"
	BlockToolResult   = "tool_result"
	BlockResourceLink = "resource_link"
	BlockResource     = "resource"
)

// Stop reasons of MCP's CreateMessageResult. Providers may report their own
// string when nothing maps.
const (
	StopEndTurn      = "endTurn"
	StopStopSequence = "stopSequence"
	StopMaxTokens    = "maxTokens"
	StopToolUse      = "toolUse"
	StopRefusal      = "refusal"
	StopOther        = "other"
)

// Content is one MCP content block. Type selects which fields are meaningful:
// text uses Text; image and audio use Data and MIMEType; tool_use uses ID,
// Name and Input; tool_result uses ToolUseID, Content, StructuredContent and
// IsError. Members this type does not model (annotations of resource links,
// embedded resources, future fields) are kept in Extra so that a block
// round-trips without loss.
type Content struct {
	Type string

	Text string

	Data     string
	MIMEType string

	ID    string
	Name  string
	Input json.RawMessage

	ToolUseID         string
	Content           []Content
	StructuredContent json.RawMessage
	IsError           *bool

	Annotations json.RawMessage
	Meta        json.RawMessage
	// Extra holds every other member by name, as it was received.
	Extra map[string]json.RawMessage
}

// TextBlock returns a text content block.
func TextBlock(s string) Content { return Content{Type: BlockText, Text: s} }

// UserMessage returns a user message holding blocks.
func UserMessage(blocks ...Content) Message { return Message{Role: RoleUser, Content: blocks} }

// AssistantMessage returns an assistant message holding blocks.
func AssistantMessage(blocks ...Content) Message {
	return Message{Role: RoleAssistant, Content: blocks}
}

// knownMember reports whether Content models the member k itself.
func knownMember(k string) bool {
	switch k {
	case "type", "text", "data", "mimeType", "id", "name", "input", "toolUseId",
		"content", "structuredContent", "isError", "annotations", "_meta":
		return true
	}
	return false
}

// UnmarshalJSON decodes one block, keeping unmodelled members in Extra.
// An error is a *PathError at the bad member.
func (c *Content) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return &PathError{Message: "content block must be an object"}
	}
	*c = Content{}
	var err error
	str := func(key string, dst *string) {
		if v, ok := m[key]; ok && err == nil && (!jsonKindIs(v, "string") || json.Unmarshal(v, dst) != nil) {
			err = &PathError{Path: "/" + key, Message: key + " must be a string"}
		}
	}
	str("type", &c.Type)
	str("text", &c.Text)
	str("data", &c.Data)
	str("mimeType", &c.MIMEType)
	str("id", &c.ID)
	str("name", &c.Name)
	str("toolUseId", &c.ToolUseID)
	if err != nil {
		return err
	}
	if c.Type == "" {
		return &PathError{Message: "content block needs a type"}
	}
	c.Input = m["input"]
	c.StructuredContent = m["structuredContent"]
	c.Annotations = m["annotations"]
	c.Meta = m["_meta"]
	if v, ok := m["content"]; ok {
		if c.Type != BlockToolResult {
			// Only tool results nest content; keep it verbatim for others.
			c.setExtra("content", v)
		} else {
			var items []json.RawMessage
			if !jsonKindIs(v, "array") || json.Unmarshal(v, &items) != nil {
				return &PathError{Path: "/content", Message: "content must be an array"}
			}
			c.Content = make([]Content, len(items))
			for i, item := range items {
				if err := json.Unmarshal(item, &c.Content[i]); err != nil {
					return pathOf(err, "").under(fmt.Sprintf("/content/%d", i))
				}
			}
		}
	}
	if v, ok := m["isError"]; ok {
		var b bool
		if !jsonKindIs(v, "boolean") || json.Unmarshal(v, &b) != nil {
			return &PathError{Path: "/isError", Message: "isError must be a boolean"}
		}
		c.IsError = &b
	}
	for k, v := range m {
		if !knownMember(k) {
			c.setExtra(k, v)
		}
	}
	return nil
}

func (c *Content) setExtra(k string, v json.RawMessage) {
	if c.Extra == nil {
		c.Extra = map[string]json.RawMessage{}
	}
	c.Extra[k] = v
}

// MarshalJSON encodes the block with the members its type requires, then
// the members kept in Extra.
func (c Content) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(c.wire())
	if err != nil || len(c.Extra) == 0 {
		return b, err
	}
	return withExtra(b, c.Extra)
}

// WireBlocks returns blocks in the form MarshalJSON writes them, for an
// encoder to write as they are: encoding/json reads again and compacts
// what a MarshalJSON returns. The wire blocks point into blocks. It
// returns nil when a block keeps members outside the model (Extra), which
// only MarshalJSON writes.
func WireBlocks(blocks []Content) []BlockWire {
	out := make([]BlockWire, len(blocks))
	for i := range blocks {
		if len(blocks[i].Extra) > 0 {
			return nil
		}
		out[i] = blocks[i].wire()
	}
	return out
}

// wire is c without its Extra, as it is written.
func (c *Content) wire() BlockWire {
	w := BlockWire{Type: c.Type, Annotations: c.Annotations, Meta: c.Meta}
	switch c.Type {
	case BlockText:
		w.Text = &c.Text
	case BlockImage, BlockAudio:
		w.Data, w.MIMEType = &c.Data, &c.MIMEType
	case BlockToolUse:
		w.ID, w.Name, w.Input = &c.ID, &c.Name, c.Input
		if len(w.Input) == 0 {
			w.Input = json.RawMessage("{}")
		}
	case BlockToolResult:
		w.ToolUseID, w.Content, w.StructuredContent, w.IsError = &c.ToolUseID, c.Content, c.StructuredContent, c.IsError
		if w.Content == nil {
			w.Content = []Content{}
		}
	default:
		// Other block types (resource_link, resource) carry their modelled
		// string members only when set.
		w.Text, w.Data, w.MIMEType, w.ID, w.Name = ifSet(&c.Text), ifSet(&c.Data), ifSet(&c.MIMEType), ifSet(&c.ID), ifSet(&c.Name)
	}
	return w
}

// ifSet returns s, or nil when *s is empty.
func ifSet(s *string) *string {
	if *s == "" {
		return nil
	}
	return s
}

// BlockWire is a content block as it is written: nil members are left
// out.
type BlockWire struct {
	Type              string          `json:"type"`
	Text              *string         `json:"text,omitempty"`
	Data              *string         `json:"data,omitempty"`
	MIMEType          *string         `json:"mimeType,omitempty"`
	ID                *string         `json:"id,omitempty"`
	Name              *string         `json:"name,omitempty"`
	Input             json.RawMessage `json:"input,omitempty"`
	ToolUseID         *string         `json:"toolUseId,omitempty"`
	Content           []Content       `json:"content,omitzero"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           *bool           `json:"isError,omitempty"`
	Annotations       json.RawMessage `json:"annotations,omitempty"`
	Meta              json.RawMessage `json:"_meta,omitempty"`
}

// Message is MCP's SamplingMessage. On input Content may be one block or an
// array; a message that arrived with one bare block is written back the same
// way. Members MCP leaves open are kept: _meta in Meta, any other in Extra.
type Message struct {
	Role    Role
	Content []Content
	Meta    json.RawMessage
	// Extra holds the members this type does not model, as received.
	Extra  map[string]json.RawMessage
	single bool
}

// UnmarshalJSON accepts content as one block or an array of blocks, each
// shaped as MCP's schema says (see blockShape).
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return &PathError{Path: "", Message: "a message must be an object with role and content"}
	}
	*m = Message{}
	for k, v := range raw {
		switch k {
		case "role":
			if err := json.Unmarshal(v, &m.Role); err != nil {
				return &PathError{Path: "/role", Message: "role must be user or assistant"}
			}
		case "content":
		case "_meta":
			if !isObject(v) {
				return &PathError{Path: "/_meta", Message: "_meta must be an object"}
			}
			m.Meta = v
		default:
			if m.Extra == nil {
				m.Extra = map[string]json.RawMessage{}
			}
			m.Extra[k] = v
		}
	}
	if _, ok := raw["role"]; !ok {
		return &PathError{Path: "/role", Message: "role is required"}
	}
	content := raw["content"]
	if len(content) == 0 {
		return &PathError{Path: "/content", Message: "content is required"}
	}
	blocks, single, err := decodeBlocks(content)
	if err != nil {
		return err
	}
	m.Content, m.single = blocks, single
	return nil
}

// MarshalJSON writes content as an array, or as a bare block when the
// message was received that way, and the members kept in Extra.
func (m Message) MarshalJSON() ([]byte, error) {
	content, err := encodeBlocks(m.Content, m.single)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(messageWire{Role: m.Role, Content: content, Meta: m.Meta})
	if err != nil || len(m.Extra) == 0 {
		return b, err
	}
	return withExtra(b, m.Extra)
}

// withExtra adds the members of extra to the JSON object b; b's own members
// win.
func withExtra(b []byte, extra map[string]json.RawMessage) ([]byte, error) {
	var own map[string]json.RawMessage
	if err := json.Unmarshal(b, &own); err != nil {
		return nil, err
	}
	all := make(map[string]json.RawMessage, len(own)+len(extra))
	maps.Copy(all, extra)
	maps.Copy(all, own)
	return json.Marshal(all)
}

// isObject reports whether v is a JSON object.
func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

// decodeBlocks reads one block or an array of blocks.
func decodeBlocks(raw json.RawMessage) ([]Content, bool, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return nil, false, &PathError{Path: "/content", Message: "content must be a block or an array of blocks"}
	case raw[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, false, &PathError{Path: "/content", Message: "content must be a block or an array of blocks"}
		}
		blocks := make([]Content, len(items))
		for i, item := range items {
			at := fmt.Sprintf("/content/%d", i)
			if err := json.Unmarshal(item, &blocks[i]); err != nil {
				return nil, false, pathOf(err, "").under(at)
			}
			if pe := blockShape(item, false); pe != nil {
				return nil, false, pe.under(at)
			}
		}
		return blocks, false, nil
	default:
		var c Content
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, false, pathOf(err, "").under("/content")
		}
		if pe := blockShape(raw, false); pe != nil {
			return nil, false, pe.under("/content")
		}
		return []Content{c}, true, nil
	}
}

// blockShape checks the members MCP's schema (2025-11-25) requires of a
// block of a known type, and their JSON types; paths are relative to the
// block. nested is set for the blocks inside a tool result, which are
// ContentBlocks: text, image, audio, resource_link or resource, never
// tool_use or tool_result. Unknown top-level types are left to the request
// checks, which name them.
func blockShape(raw json.RawMessage, nested bool) *PathError {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return &PathError{Path: "", Message: "content block must be an object"}
	}
	var typ string
	if err := json.Unmarshal(m["type"], &typ); err != nil {
		return &PathError{Path: "/type", Message: "type must be a string"}
	}
	need := func(kind string, keys ...string) *PathError {
		for _, k := range keys {
			v, ok := m[k]
			if !ok {
				return &PathError{Path: "/" + k, Message: fmt.Sprintf("%s blocks need %s", typ, k)}
			}
			if !jsonKindIs(v, kind) {
				return &PathError{Path: "/" + k, Message: fmt.Sprintf("%s must be %s", k, kindName(kind))}
			}
		}
		return nil
	}
	if v, ok := m["_meta"]; ok && !isObject(v) {
		return &PathError{Path: "/_meta", Message: "_meta must be an object"}
	}
	if v, ok := m["annotations"]; ok {
		if pe := annotationsShape(v); pe != nil {
			return pe.under("/annotations")
		}
	}
	switch typ {
	case BlockText:
		return need("string", "text")
	case BlockImage, BlockAudio:
		return need("string", "data", "mimeType")
	case BlockResourceLink:
		if nested {
			return need("string", "uri", "name")
		}
	case BlockResource:
		if nested {
			return need("object", "resource")
		}
	case BlockToolUse:
		if nested {
			return &PathError{Path: "/type", Message: "a tool result's content holds text, image, audio, resource_link or resource blocks, not tool_use"}
		}
		if pe := need("string", "id", "name"); pe != nil {
			return pe
		}
		return need("object", "input")
	case BlockToolResult:
		if nested {
			return &PathError{Path: "/type", Message: "a tool result's content holds text, image, audio, resource_link or resource blocks, not tool_result"}
		}
		if pe := need("string", "toolUseId"); pe != nil {
			return pe
		}
		if pe := need("array", "content"); pe != nil {
			return pe
		}
		if v, ok := m["structuredContent"]; ok && !isObject(v) {
			return &PathError{Path: "/structuredContent", Message: "structuredContent must be an object"}
		}
		var items []json.RawMessage
		_ = json.Unmarshal(m["content"], &items)
		for i, item := range items {
			if pe := blockShape(item, true); pe != nil {
				return pe.under(fmt.Sprintf("/content/%d", i))
			}
		}
		return nil
	default:
		if nested {
			return &PathError{Path: "/type", Message: fmt.Sprintf("unknown content block type %q", typ)}
		}
	}
	return nil
}

// annotationsShape checks MCP's Annotations: an object whose audience is
// an array of roles, lastModified a string and priority a number from 0
// to 1. Paths are relative to the annotations.
func annotationsShape(v json.RawMessage) *PathError {
	var a map[string]json.RawMessage
	if json.Unmarshal(v, &a) != nil || a == nil {
		return &PathError{Message: "annotations must be an object"}
	}
	if v, ok := a["audience"]; ok {
		var roles []json.RawMessage
		if !jsonKindIs(v, "array") || json.Unmarshal(v, &roles) != nil {
			return &PathError{Path: "/audience", Message: "audience must be an array of roles"}
		}
		for i, r := range roles {
			if s := string(bytes.TrimSpace(r)); s != `"user"` && s != `"assistant"` {
				return &PathError{Path: fmt.Sprintf("/audience/%d", i), Message: "a role is user or assistant"}
			}
		}
	}
	if v, ok := a["lastModified"]; ok && !jsonKindIs(v, "string") {
		return &PathError{Path: "/lastModified", Message: "lastModified must be a string"}
	}
	if v, ok := a["priority"]; ok {
		var p float64
		if !jsonKindIs(v, "number") || json.Unmarshal(v, &p) != nil || p < 0 || p > 1 {
			return &PathError{Path: "/priority", Message: "priority must be a number from 0 to 1"}
		}
	}
	return nil
}

// jsonKindIs reports whether v is a JSON value of kind: string, object,
// array, number or boolean.
func jsonKindIs(v json.RawMessage, kind string) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return false
	}
	switch kind {
	case "string":
		return v[0] == '"'
	case "object":
		return v[0] == '{'
	case "array":
		return v[0] == '['
	case "number":
		return v[0] == '-' || v[0] >= '0' && v[0] <= '9'
	case "boolean":
		return v[0] == 't' || v[0] == 'f'
	}
	return false
}

// JSONKind names the JSON values a Go type takes, as a decoding error
// says what it wanted: "an integer", "a number", "a string", "a boolean",
// "an array" or "an object".
func JSONKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

func kindName(kind string) string {
	if kind == "array" || kind == "object" {
		return "an " + kind
	}
	return "a " + kind
}

type messageWire struct {
	Role    Role            `json:"role"`
	Content json.RawMessage `json:"content"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

// PathError is a decoding error at a JSON Pointer path relative to the
// value being decoded.
type PathError struct {
	Path    string
	Message string
}

func (e *PathError) Error() string {
	if e.Path == "" {
		return e.Message // about the value itself; its holder knows where it is
	}
	return e.Path + ": " + e.Message
}

// under returns the error with its path put under the pointer at.
func (e *PathError) under(at string) *PathError {
	return &PathError{Path: at + e.Path, Message: e.Message}
}

// pathOf is an error of json.Unmarshal as a *PathError relative to the
// value decoded: a *PathError as it is, a type error at its member, and
// anything else at the value, saying msg (or, with msg empty, that the
// value is not what it should be).
func pathOf(err error, msg string) *PathError {
	var pe *PathError
	if errors.As(err, &pe) {
		return pe
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field != "" {
		return &PathError{Path: "/" + strings.ReplaceAll(typ.Field, ".", "/"), Message: "must be " + JSONKind(typ.Type)}
	}
	if msg == "" {
		msg = "not a valid value here"
	}
	return &PathError{Message: msg}
}

// encodeBlocks writes one bare block when single is set and there is exactly
// one block, else an array.
func encodeBlocks(blocks []Content, single bool) (json.RawMessage, error) {
	if single && len(blocks) == 1 {
		return json.Marshal(blocks[0])
	}
	if blocks == nil {
		blocks = []Content{}
	}
	return json.Marshal(blocks)
}

// Tool is MCP's Tool definition. InputSchema is a JSON Schema object.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Icons        json.RawMessage `json:"icons,omitempty"`
	Execution    json.RawMessage `json:"execution,omitempty"`
	Meta         json.RawMessage `json:"_meta,omitempty"`
}

// Tool choice modes. ToolChoiceTool is an extension of MCP that forces the
// tool named in ToolChoice.Name.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceNone     = "none"
	ToolChoiceTool     = "tool"
)

// ToolChoice is MCP's ToolChoice plus the {mode:"tool", name} extension. A nil
// *ToolChoice means auto. On input the string shorthand ("auto") is accepted.
type ToolChoice struct {
	Mode string `json:"mode,omitempty"`
	Name string `json:"name,omitempty"`
	// DisableParallelToolUse asks for at most one tool call per answer. On
	// input it is also accepted in the spelling of the SEP-1577 draft,
	// disable_parallel_tool_use. Providers that cannot be told get their
	// answer cut to its first tool call.
	DisableParallelToolUse bool `json:"disableParallelToolUse,omitempty"`
}

// UnmarshalJSON accepts {"mode":...} or the string shorthand.
func (tc *ToolChoice) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*tc = ToolChoice{Mode: s}
		return nil
	}
	var w struct {
		Mode                   string `json:"mode"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disableParallelToolUse"`
		DraftDisableParallel   *bool  `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return &PathError{Path: "/" + typ.Field, Message: fmt.Sprintf("%s must be %s", typ.Field, JSONKind(typ.Type))}
		}
		return &PathError{Message: "toolChoice must be a string or an object with mode"}
	}
	*tc = ToolChoice{Mode: w.Mode, Name: w.Name}
	for _, v := range []*bool{w.DisableParallelToolUse, w.DraftDisableParallel} {
		if v != nil && *v {
			tc.DisableParallelToolUse = true
		}
	}
	return nil
}

// Parallel reports whether an answer may hold more than one tool call.
func (tc *ToolChoice) Parallel() bool { return tc == nil || !tc.DisableParallelToolUse }

// EffectiveMode returns the mode, defaulting to auto.
func (tc *ToolChoice) EffectiveMode() string {
	if tc == nil || tc.Mode == "" {
		return ToolChoiceAuto
	}
	return tc.Mode
}

// ModelHint is MCP's ModelHint.
type ModelHint struct {
	Name string `json:"name,omitempty"`
}

// ModelPreferences is MCP's ModelPreferences. Nil priorities are unset.
type ModelPreferences struct {
	Hints                []ModelHint `json:"hints,omitempty"`
	CostPriority         *float64    `json:"costPriority,omitempty"`
	SpeedPriority        *float64    `json:"speedPriority,omitempty"`
	IntelligencePriority *float64    `json:"intelligencePriority,omitempty"`
}

// UnmarshalJSON decodes the preferences leniently: MCP leaves the object
// (and its hints) open, so unknown members are ignored even by a strict
// decoder. A type error names its member in the Field of a
// *json.UnmarshalTypeError, hints by index ("hints.1.name"), which the
// decoder of an enclosing value prefixes with its own members.
func (p *ModelPreferences) UnmarshalJSON(b []byte) error {
	var w struct {
		Hints []json.RawMessage `json:"hints"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	// The hints one by one, for the errors' paths; then the whole.
	for i, h := range w.Hints {
		if err := json.Unmarshal(h, new(ModelHint)); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) {
				typ.Field = strings.TrimSuffix(fmt.Sprintf("hints.%d.%s", i, typ.Field), ".")
			}
			return err
		}
	}
	type plain ModelPreferences
	return json.Unmarshal(b, (*plain)(p))
}

// ToolCall is a tool_use block of a result, in the shape the REST API returns.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Usage counts tokens of one or more model calls, and what they cost.
// Providers report the tokens; the cost is filled in by whoever wraps a
// provider with a price table (internal/app), the domain prices nothing.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	// CachedInputTokens are the part of InputTokens the provider read
	// from its prompt cache, where it reports them (OpenAI's
	// cached_tokens, Anthropic's cache reads).
	CachedInputTokens int `json:"cachedInputTokens,omitempty"`
	// CostUSD is the calls' cost in US dollars at the configured prices.
	CostUSD float64 `json:"costUsd"`
	// Unpriced says that a call of a model without a price is among them:
	// it cost 0 in CostUSD.
	Unpriced bool `json:"unpriced,omitempty"`
}

// Add returns the sum of two usages. The cost is kept to a billionth of
// a dollar, so that sums of binary fractions read as the decimals they
// are (0.0000925, not 0.00009250000000000001).
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens, CostUSD: RoundUSD(u.CostUSD + v.CostUSD), Unpriced: u.Unpriced || v.Unpriced}
}

// RoundUSD rounds a cost in dollars to a billionth of a dollar.
func RoundUSD(usd float64) float64 { return math.Round(usd*1e9) / 1e9 }

// TextOf joins the text blocks of content with newlines.
func TextOf(content []Content) string {
	if len(content) == 1 && content[0].Type == BlockText {
		return content[0].Text // the common answer: no copy
	}
	var buf bytes.Buffer
	for _, c := range content {
		if c.Type == BlockText {
			if buf.Len() > 0 {
				buf.WriteByte('\n')
			}
			buf.WriteString(c.Text)
		}
	}
	return buf.String()
}

// ToolCallsOf returns the tool_use blocks of content as tool calls.
func ToolCallsOf(content []Content) []ToolCall {
	var calls []ToolCall
	for _, c := range content {
		if c.Type == BlockToolUse {
			args := c.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			calls = append(calls, ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
		}
	}
	return calls
}

// StructuredText is a tool result's structuredContent as compact JSON, for
// the providers whose tool results are text only, or "" when it has none or
// when one of its text blocks already holds the same JSON value: MCP asks a
// tool that returns structured content to send it serialized in a text
// block too, and a model need not read it twice.
func (c *Content) StructuredText() string {
	sc := bytes.TrimSpace(c.StructuredContent)
	if len(sc) == 0 || string(sc) == "null" {
		return ""
	}
	var v any
	if json.Unmarshal(sc, &v) == nil {
		for _, b := range c.Content {
			if b.Type != BlockText {
				continue
			}
			var t any
			if json.Unmarshal([]byte(b.Text), &t) == nil && reflect.DeepEqual(t, v) {
				return ""
			}
		}
	}
	return string(CompactJSON(sc))
}

// CompactJSON returns b without insignificant space, or b itself when it is
// not valid JSON.
func CompactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}
