package sampler

//lint:file-ignore SA1019 MCP sampling, deprecated by the 2026-07-28 revision, is what this file maps; it works through the deprecation window.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file is the one bridge between go-sdk's MCP types and the domain's:
// a field-by-field mapping. The members that either side holds as free
// JSON (_meta, tool inputs and schemas, structuredContent, annotations) are
// encoded or decoded alone; what neither go-sdk type models (a message's
// _meta, the toolChoice extensions, a tool's execution) is dropped on the
// way to go-sdk.

// bridge carries the first error of a conversion, so that the mapping
// reads as a list of fields.
type bridge struct{ err error }

// raw encodes v; nil when v encodes as null (absent).
func (b *bridge) raw(v any) json.RawMessage {
	out, err := json.Marshal(v)
	if err != nil {
		b.fail(err)
		return nil
	}
	if string(out) == "null" {
		return nil
	}
	return out
}

// decode decodes r into dst; nothing when r is absent.
func (b *bridge) decode(r json.RawMessage, dst any) {
	if len(r) > 0 {
		if err := json.Unmarshal(r, dst); err != nil {
			b.fail(err)
		}
	}
}

// member decodes the member k of c.Extra into dst.
func (b *bridge) member(c Content, k string, dst any) { b.decode(c.Extra[k], dst) }

func (b *bridge) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// extra sets the member k of c.Extra to v unless v is absent.
func (b *bridge) extra(c *Content, k string, v any) {
	if r := b.raw(v); r != nil {
		c.setExtra(k, r)
	}
}

// FromMCPContents converts go-sdk content blocks to the domain's.
func FromMCPContents(cs []mcp.Content) ([]Content, error) {
	var b bridge
	out := b.fromContents(cs)
	return out, b.err
}

// ToMCPContents converts domain content blocks to go-sdk's.
func ToMCPContents(cs []Content) ([]mcp.Content, error) {
	var b bridge
	out := b.toContents(cs)
	return out, b.err
}

func (b *bridge) fromContents(cs []mcp.Content) []Content {
	if cs == nil {
		return nil
	}
	out := make([]Content, len(cs))
	for i, c := range cs {
		out[i] = b.fromContent(c)
	}
	return out
}

func (b *bridge) fromContent(c mcp.Content) Content {
	switch c := c.(type) {
	case *mcp.TextContent:
		return Content{Type: BlockText, Text: c.Text, Meta: b.raw(c.Meta), Annotations: b.raw(c.Annotations)}
	case *mcp.ImageContent:
		return Content{Type: BlockImage, Data: base64.StdEncoding.EncodeToString(c.Data), MIMEType: c.MIMEType,
			Meta: b.raw(c.Meta), Annotations: b.raw(c.Annotations)}
	case *mcp.AudioContent:
		return Content{Type: BlockAudio, Data: base64.StdEncoding.EncodeToString(c.Data), MIMEType: c.MIMEType,
			Meta: b.raw(c.Meta), Annotations: b.raw(c.Annotations)}
	case *mcp.ToolUseContent:
		return Content{Type: BlockToolUse, ID: c.ID, Name: c.Name, Input: b.raw(c.Input), Meta: b.raw(c.Meta)}
	case *mcp.ToolResultContent:
		out := Content{Type: BlockToolResult, ToolUseID: c.ToolUseID, Content: b.fromContents(c.Content),
			StructuredContent: b.raw(c.StructuredContent), Meta: b.raw(c.Meta)}
		if c.IsError {
			isError := true
			out.IsError = &isError
		}
		return out
	case *mcp.ResourceLink:
		out := Content{Type: BlockResourceLink, Name: c.Name, MIMEType: c.MIMEType, Meta: b.raw(c.Meta), Annotations: b.raw(c.Annotations)}
		b.extra(&out, "uri", c.URI)
		if c.Title != "" {
			b.extra(&out, "title", c.Title)
		}
		if c.Description != "" {
			b.extra(&out, "description", c.Description)
		}
		b.extra(&out, "size", c.Size)
		b.extra(&out, "icons", c.Icons)
		return out
	case *mcp.EmbeddedResource:
		out := Content{Type: BlockResource, Meta: b.raw(c.Meta), Annotations: b.raw(c.Annotations)}
		b.extra(&out, "resource", c.Resource)
		return out
	}
	b.fail(fmt.Errorf("content block of type %T", c))
	return Content{}
}

func (b *bridge) toContents(cs []Content) []mcp.Content {
	if cs == nil {
		return nil
	}
	out := make([]mcp.Content, len(cs))
	for i, c := range cs {
		out[i] = b.toContent(c)
	}
	return out
}

func (b *bridge) toContent(c Content) mcp.Content {
	var meta mcp.Meta
	var ann *mcp.Annotations
	b.decode(c.Meta, &meta)
	b.decode(c.Annotations, &ann)
	switch c.Type {
	case BlockText:
		return &mcp.TextContent{Text: c.Text, Meta: meta, Annotations: ann}
	case BlockImage, BlockAudio:
		data, err := base64.StdEncoding.DecodeString(c.Data)
		if err != nil {
			b.fail(fmt.Errorf("%s data: %w", c.Type, err))
		}
		if c.Type == BlockImage {
			return &mcp.ImageContent{Data: data, MIMEType: c.MIMEType, Meta: meta, Annotations: ann}
		}
		return &mcp.AudioContent{Data: data, MIMEType: c.MIMEType, Meta: meta, Annotations: ann}
	case BlockToolUse:
		out := &mcp.ToolUseContent{ID: c.ID, Name: c.Name, Meta: meta}
		b.decode(c.Input, &out.Input)
		return out
	case BlockToolResult:
		out := &mcp.ToolResultContent{ToolUseID: c.ToolUseID, Content: b.toContents(c.Content), IsError: c.IsError != nil && *c.IsError, Meta: meta}
		b.decode(c.StructuredContent, &out.StructuredContent)
		return out
	case BlockResourceLink:
		out := &mcp.ResourceLink{Name: c.Name, MIMEType: c.MIMEType, Meta: meta, Annotations: ann}
		b.member(c, "uri", &out.URI)
		b.member(c, "title", &out.Title)
		b.member(c, "description", &out.Description)
		b.member(c, "size", &out.Size)
		b.member(c, "icons", &out.Icons)
		return out
	case BlockResource:
		out := &mcp.EmbeddedResource{Meta: meta, Annotations: ann}
		b.member(c, "resource", &out.Resource)
		return out
	}
	b.fail(fmt.Errorf("content block of type %q", c.Type))
	return nil
}

// FromMCPParams converts go-sdk's sampling request to the domain's.
// maxTokens is always set (go-sdk cannot tell it absent); a temperature of
// 0 is absent (go-sdk cannot tell it set).
func FromMCPParams(p *mcp.CreateMessageWithToolsParams) (*CreateMessageParams, error) {
	var b bridge
	maxTokens := int(p.MaxTokens)
	out := &CreateMessageParams{
		Messages:       make([]Message, len(p.Messages)),
		SystemPrompt:   p.SystemPrompt,
		IncludeContext: p.IncludeContext,
		MaxTokens:      &maxTokens,
		StopSequences:  p.StopSequences,
		Metadata:       b.raw(p.Metadata),
		Meta:           b.raw(p.Meta),
	}
	for i, m := range p.Messages {
		out.Messages[i] = Message{Role: Role(m.Role), Content: b.fromContents(m.Content)}
	}
	if p.Temperature != 0 {
		out.Temperature = &p.Temperature
	}
	if mp := p.ModelPreferences; mp != nil {
		out.ModelPreferences = &ModelPreferences{CostPriority: nonZero(mp.CostPriority),
			SpeedPriority: nonZero(mp.SpeedPriority), IntelligencePriority: nonZero(mp.IntelligencePriority)}
		for _, h := range mp.Hints {
			out.ModelPreferences.Hints = append(out.ModelPreferences.Hints, ModelHint{Name: h.Name})
		}
	}
	for _, t := range p.Tools {
		out.Tools = append(out.Tools, Tool{Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: b.raw(t.InputSchema), OutputSchema: b.raw(t.OutputSchema),
			Annotations: b.raw(t.Annotations), Icons: b.raw(t.Icons), Meta: b.raw(t.Meta)})
	}
	if p.ToolChoice != nil {
		out.ToolChoice = &ToolChoice{Mode: p.ToolChoice.Mode}
	}
	return out, b.err
}

// ToMCPParams converts a domain sampling request to go-sdk's.
func ToMCPParams(p *CreateMessageParams) (*mcp.CreateMessageWithToolsParams, error) {
	var b bridge
	out := &mcp.CreateMessageWithToolsParams{
		Messages:       make([]*mcp.SamplingMessageV2, len(p.Messages)),
		SystemPrompt:   p.SystemPrompt,
		IncludeContext: p.IncludeContext,
		StopSequences:  p.StopSequences,
	}
	for i, m := range p.Messages {
		out.Messages[i] = &mcp.SamplingMessageV2{Role: mcp.Role(m.Role), Content: b.toContents(m.Content)}
	}
	if p.MaxTokens != nil {
		out.MaxTokens = int64(*p.MaxTokens)
	}
	if p.Temperature != nil {
		out.Temperature = *p.Temperature
	}
	b.decode(p.Metadata, &out.Metadata)
	b.decode(p.Meta, &out.Meta)
	if mp := p.ModelPreferences; mp != nil {
		out.ModelPreferences = &mcp.ModelPreferences{CostPriority: zeroIfNil(mp.CostPriority),
			SpeedPriority: zeroIfNil(mp.SpeedPriority), IntelligencePriority: zeroIfNil(mp.IntelligencePriority)}
		for _, h := range mp.Hints {
			out.ModelPreferences.Hints = append(out.ModelPreferences.Hints, &mcp.ModelHint{Name: h.Name})
		}
	}
	for _, t := range p.Tools {
		mt := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description}
		b.decode(t.InputSchema, &mt.InputSchema)
		b.decode(t.OutputSchema, &mt.OutputSchema)
		b.decode(t.Annotations, &mt.Annotations)
		b.decode(t.Icons, &mt.Icons)
		b.decode(t.Meta, &mt.Meta)
		out.Tools = append(out.Tools, mt)
	}
	if p.ToolChoice != nil {
		out.ToolChoice = &mcp.ToolChoice{Mode: p.ToolChoice.Mode}
	}
	return out, b.err
}

// FromMCPResult converts go-sdk's sampling result to the domain's.
func FromMCPResult(r *mcp.CreateMessageWithToolsResult) (*CreateMessageResult, error) {
	var b bridge
	out := &CreateMessageResult{Role: Role(r.Role), Content: b.fromContents(r.Content), Model: r.Model,
		StopReason: r.StopReason, Meta: b.raw(r.Meta)}
	return out, b.err
}

// ToMCPResult converts a domain sampling result to go-sdk's.
func ToMCPResult(r *CreateMessageResult) (*mcp.CreateMessageWithToolsResult, error) {
	var b bridge
	out := &mcp.CreateMessageWithToolsResult{Role: mcp.Role(r.Role), Content: b.toContents(r.Content), Model: r.Model,
		StopReason: r.StopReason}
	b.decode(r.Meta, &out.Meta)
	return out, b.err
}

// nonZero returns a pointer to v, nil for 0 (go-sdk's absent priority).
func nonZero(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return &v
}

// zeroIfNil returns *v, 0 for nil.
func zeroIfNil(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}
