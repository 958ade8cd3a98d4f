package sampler

import (
	"encoding/json"
	"fmt"
)

// CreateMessageParams is MCP's CreateMessageRequestParams (2025-11-25).
type CreateMessageParams struct {
	Messages         []Message         `json:"messages"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	MaxTokens        *int              `json:"maxTokens,omitempty"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	Metadata         json.RawMessage   `json:"metadata,omitempty"`
	Tools            []Tool            `json:"tools,omitempty"`
	ToolChoice       *ToolChoice       `json:"toolChoice,omitempty"`
	Task             json.RawMessage   `json:"task,omitempty"`
	Meta             json.RawMessage   `json:"_meta,omitempty"`
}

// UnmarshalJSON decodes the params; a bad message gives an *InvalidError
// naming it, e.g. /messages/2/content/0.
func (p *CreateMessageParams) UnmarshalJSON(b []byte) error {
	type plain CreateMessageParams
	var w struct {
		plain
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = CreateMessageParams(w.plain)
	if w.Messages == nil {
		return nil
	}
	msgs, err := DecodeMessages(w.Messages)
	p.Messages = msgs
	return err
}

// CreateMessageResult is MCP's CreateMessageResult. Content is written as a
// bare block when there is one, else as an array.
type CreateMessageResult struct {
	Role       Role
	Content    []Content
	Model      string
	StopReason string
	Meta       json.RawMessage
}

type createMessageResultWire struct {
	Role       Role            `json:"role"`
	Content    json.RawMessage `json:"content"`
	Model      string          `json:"model"`
	StopReason string          `json:"stopReason,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}

// MarshalJSON writes one block bare and several as an array.
func (r CreateMessageResult) MarshalJSON() ([]byte, error) {
	content, err := encodeBlocks(r.Content, len(r.Content) == 1)
	if err != nil {
		return nil, err
	}
	return json.Marshal(createMessageResultWire{Role: r.Role, Content: content, Model: r.Model, StopReason: r.StopReason, Meta: r.Meta})
}

// UnmarshalJSON accepts content as one block or an array.
func (r *CreateMessageResult) UnmarshalJSON(b []byte) error {
	var w createMessageResultWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	blocks, _, err := decodeBlocks(w.Content)
	if err != nil {
		return err
	}
	*r = CreateMessageResult{Role: w.Role, Content: blocks, Model: w.Model, StopReason: w.StopReason, Meta: w.Meta}
	return nil
}

// Params converts the params to a sampling request, checking the rules
// MCP sets beyond the shape: messages and maxTokens are required,
// includeContext is none, thisServer or allServers. An error is an
// *InvalidError naming the paths.
func (p *CreateMessageParams) Params() (*Params, error) {
	var errs []FieldError
	if p.Messages == nil {
		errs = append(errs, FieldError{Path: "/messages", Message: "messages is required"})
	}
	if p.MaxTokens == nil {
		errs = append(errs, FieldError{Path: "/maxTokens", Message: "maxTokens is required"})
	}
	switch p.IncludeContext {
	case "", "none", "thisServer", "allServers":
	default:
		errs = append(errs, FieldError{Path: "/includeContext", Message: "includeContext must be none, thisServer or allServers"})
	}
	if len(errs) > 0 {
		return nil, InvalidAll(errs)
	}
	return &Params{
		Request: Request{
			Messages:      p.Messages,
			SystemPrompt:  p.SystemPrompt,
			MaxTokens:     *p.MaxTokens,
			Temperature:   p.Temperature,
			StopSequences: p.StopSequences,
			Metadata:      p.Metadata,
			Tools:         p.Tools,
			ToolChoice:    p.ToolChoice,
		},
		ModelPreferences: p.ModelPreferences,
	}, nil
}

// CreateMessageResultOf converts a sampling result to MCP's result. An
// answer without content becomes one empty text block: MCP requires one.
func CreateMessageResultOf(res *Result) CreateMessageResult {
	out := CreateMessageResult{Role: res.Role, Content: res.Content, Model: res.Model, StopReason: res.StopReason}
	if len(out.Content) == 0 {
		out.Content = []Content{TextBlock("")}
	}
	return out
}

// DecodeMessages decodes each message on its own so that an error names
// it; the *InvalidError lists every bad message.
func DecodeMessages(raw []json.RawMessage) ([]Message, error) {
	msgs := make([]Message, len(raw))
	var errs []FieldError
	for i, r := range raw {
		if err := json.Unmarshal(r, &msgs[i]); err != nil {
			path, msg := fmt.Sprintf("/messages/%d", i), err.Error()
			if pe, ok := err.(*PathError); ok {
				path, msg = path+pe.Path, pe.Message
			}
			errs = append(errs, FieldError{Path: path, Message: msg})
		}
	}
	return msgs, InvalidAll(errs)
}
