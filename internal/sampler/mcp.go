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

// CreateMessageRequest is MCP's sampling/createMessage request.
type CreateMessageRequest struct {
	JSONRPC string              `json:"jsonrpc,omitempty"`
	ID      json.RawMessage     `json:"id,omitempty"`
	Method  string              `json:"method"`
	Params  CreateMessageParams `json:"params"`
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

// ClientCapabilities is MCP's ClientCapabilities, as sampled declares it
// when it connects to MCP servers. Members other than sampling are kept as
// given.
type ClientCapabilities struct {
	Sampling     *SamplingCapability `json:"sampling,omitempty"`
	Roots        json.RawMessage     `json:"roots,omitempty"`
	Elicitation  json.RawMessage     `json:"elicitation,omitempty"`
	Experimental json.RawMessage     `json:"experimental,omitempty"`
	Extensions   json.RawMessage     `json:"extensions,omitempty"`
	Tasks        json.RawMessage     `json:"tasks,omitempty"`
}

// SamplingCapability says a client can sample; Tools set means sampling
// with tools, Context the soft-deprecated context inclusion.
type SamplingCapability struct {
	Context json.RawMessage `json:"context,omitempty"`
	Tools   json.RawMessage `json:"tools,omitempty"`
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
