package client

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Role is the author of a message: RoleUser or RoleAssistant.
type Role string

// The roles of MCP's SamplingMessage.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Content block types, as MCP names them. Tool results may also hold
// resource_link and resource blocks, which Content keeps in Extra.
const (
	BlockText       = "text"
	BlockImage      = "image"
	BlockAudio      = "audio"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// Content is one MCP content block. Type selects the fields in use: text
// uses Text; image and audio use Data (base64) and MIMEType; tool_use uses
// ID, Name and Input; tool_result uses ToolUseID, Content,
// StructuredContent and IsError. Members Content does not model (those of
// resource_link and resource blocks, members of later MCP revisions) are
// kept in Extra as received and written back, so a block round-trips.
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
	IsError           bool

	Annotations json.RawMessage
	Meta        json.RawMessage
	// Extra holds the members Content does not model, by name.
	Extra map[string]json.RawMessage
}

// TextContent returns a text block.
func TextContent(text string) Content { return Content{Type: BlockText, Text: text} }

// contentWire is a block's modelled members as they are decoded.
type contentWire struct {
	Type              string          `json:"type"`
	Text              string          `json:"text"`
	Data              string          `json:"data"`
	MIMEType          string          `json:"mimeType"`
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Input             json.RawMessage `json:"input"`
	ToolUseID         string          `json:"toolUseId"`
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Annotations       json.RawMessage `json:"annotations"`
	Meta              json.RawMessage `json:"_meta"`
}

// modelled reports whether Content has a field of its own for the member
// k of a block of type typ.
func modelled(typ, k string) bool {
	switch k {
	case "type", "text", "data", "mimeType", "id", "name", "input", "toolUseId",
		"structuredContent", "isError", "annotations", "_meta":
		return true
	case "content":
		return typ == BlockToolResult
	}
	return false
}

// UnmarshalJSON decodes one block; members Content does not model go to
// Extra.
func (c *Content) UnmarshalJSON(b []byte) error {
	var w contentWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("content block: %w", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return fmt.Errorf("content block: %w", err)
	}
	*c = Content{Type: w.Type, Text: w.Text, Data: w.Data, MIMEType: w.MIMEType, ID: w.ID, Name: w.Name,
		Input: w.Input, ToolUseID: w.ToolUseID, StructuredContent: w.StructuredContent, IsError: w.IsError,
		Annotations: w.Annotations, Meta: w.Meta}
	if w.Type == BlockToolResult && len(w.Content) > 0 {
		if err := json.Unmarshal(w.Content, &c.Content); err != nil {
			return fmt.Errorf("tool_result content: %w", err)
		}
	}
	for k, v := range all {
		if !modelled(w.Type, k) {
			if c.Extra == nil {
				c.Extra = map[string]json.RawMessage{}
			}
			c.Extra[k] = v
		}
	}
	return nil
}

// MarshalJSON writes the members the block's type requires (an empty text,
// an empty tool input {} or an empty tool_result content [] included) and
// the others when set.
func (c Content) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, 4+len(c.Extra))
	for k, v := range c.Extra {
		m[k] = v
	}
	m["type"] = c.Type
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	switch c.Type {
	case BlockText:
		m["text"] = c.Text
	case BlockImage, BlockAudio:
		m["data"], m["mimeType"] = c.Data, c.MIMEType
	case BlockToolUse:
		input := c.Input
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		}
		m["id"], m["name"], m["input"] = c.ID, c.Name, input
	case BlockToolResult:
		blocks := c.Content
		if blocks == nil {
			blocks = []Content{}
		}
		m["toolUseId"], m["content"] = c.ToolUseID, blocks
		if len(c.StructuredContent) > 0 {
			m["structuredContent"] = c.StructuredContent
		}
		if c.IsError {
			m["isError"] = true
		}
	default:
		set("text", c.Text)
		set("data", c.Data)
		set("mimeType", c.MIMEType)
		set("id", c.ID)
		set("name", c.Name)
	}
	if len(c.Annotations) > 0 {
		m["annotations"] = c.Annotations
	}
	if len(c.Meta) > 0 {
		m["_meta"] = c.Meta
	}
	return json.Marshal(m)
}

// Message is MCP's SamplingMessage: a role and its content blocks.
type Message struct {
	Role    Role
	Content []Content
	// Meta is MCP's _meta; nil leaves it out.
	Meta json.RawMessage
}

// UserMessage returns a user message holding blocks.
func UserMessage(blocks ...Content) Message { return Message{Role: RoleUser, Content: blocks} }

// AssistantMessage returns an assistant message holding blocks.
func AssistantMessage(blocks ...Content) Message {
	return Message{Role: RoleAssistant, Content: blocks}
}

// messageWire is a message on the wire.
type messageWire struct {
	Role    Role            `json:"role"`
	Content json.RawMessage `json:"content"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

// MarshalJSON writes content as an array of blocks.
func (m Message) MarshalJSON() ([]byte, error) {
	blocks := m.Content
	if blocks == nil {
		blocks = []Content{}
	}
	content, err := json.Marshal(blocks)
	if err != nil {
		return nil, err
	}
	return json.Marshal(messageWire{Role: m.Role, Content: content, Meta: m.Meta})
}

// UnmarshalJSON accepts content as one block or an array of blocks, as MCP
// allows.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w messageWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("message: %w", err)
	}
	blocks, err := decodeBlocks(w.Content)
	if err != nil {
		return fmt.Errorf("message: %w", err)
	}
	*m = Message{Role: w.Role, Content: blocks, Meta: w.Meta}
	return nil
}

// decodeBlocks reads one block or an array of blocks.
func decodeBlocks(raw json.RawMessage) ([]Content, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case raw[0] == '[':
		var blocks []Content
		err := json.Unmarshal(raw, &blocks)
		return blocks, err
	default:
		var c Content
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		return []Content{c}, nil
	}
}
