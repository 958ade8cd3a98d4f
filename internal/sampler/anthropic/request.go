package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/sampled/sampled/internal/sampler"
)

// RespondTool is the name of the one tool of the tool-as-schema trick.
const RespondTool = "respond"

// respondDescription tells the model what the respond tool is for.
const respondDescription = "Respond with your answer. The input of this tool is the answer; it must match the input schema."

// trick says how a schema-mode request was sent with the tool-as-schema
// trick; nil means it was not.
type trick struct {
	// wrapped is set when the schema's root is not an object and the tool
	// input is {"value": <answer>}.
	wrapped bool
}

// imageType reports whether the Messages API accepts images of media type
// mt.
func imageType(mt string) bool {
	switch mt {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return true
	}
	return false
}

// params maps req to the Messages API parameters.
func (p *Provider) params(req *sampler.Request) (sdk.MessageNewParams, *trick, error) {
	params := sdk.MessageNewParams{
		Model:         sdk.Model(req.Model),
		MaxTokens:     int64(req.MaxTokens),
		StopSequences: req.StopSequences,
	}
	if req.SystemPrompt != "" {
		params.System = []sdk.TextBlockParam{{Text: req.SystemPrompt}}
	}
	if t := req.Temperature; t != nil {
		if *t < 0 || *t > 1 {
			return params, nil, sampler.Invalid("/temperature", "provider %s accepts temperature between 0 and 1", p.name)
		}
		params.Temperature = param.NewOpt(*t)
	}
	if uid, ok := userID(req.Metadata); ok {
		params.Metadata = sdk.MetadataParam{UserID: param.NewOpt(uid)}
	}
	msgs, err := p.messageParams(req.Messages)
	if err != nil {
		return params, nil, err
	}
	params.Messages = msgs

	if len(req.Schema) > 0 {
		if !json.Valid(req.Schema) {
			return params, nil, sampler.Invalid("/schema", "schema is not valid JSON")
		}
		if p.native(req.Model) {
			format, _ := json.Marshal(struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			}{"json_schema", req.Schema})
			params.OutputConfig = sdk.OutputConfigParam{Format: param.Override[sdk.JSONOutputFormatParam](json.RawMessage(format))}
			return params, nil, nil
		}
		schema, wrapped := toolSchema(req.Schema)
		params.Tools = []sdk.ToolUnionParam{{OfTool: &sdk.ToolParam{
			Name:        RespondTool,
			Description: param.NewOpt(respondDescription),
			InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
		}}}
		params.ToolChoice = sdk.ToolChoiceParamOfTool(RespondTool)
		return params, &trick{wrapped: wrapped}, nil
	}

	if len(req.Tools) == 0 {
		// tool_choice without tools is an API error; "none" and "auto"
		// mean the same as no tools at all.
		return params, nil, nil
	}
	for i, t := range req.Tools {
		if !json.Valid(t.InputSchema) {
			return params, nil, sampler.Invalid(fmt.Sprintf("/tools/%d/inputSchema", i), "inputSchema is not valid JSON")
		}
		tp := &sdk.ToolParam{Name: t.Name, InputSchema: param.Override[sdk.ToolInputSchemaParam](t.InputSchema)}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.EffectiveMode() {
		case sampler.ToolChoiceAuto:
			params.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
		case sampler.ToolChoiceRequired:
			params.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
		case sampler.ToolChoiceNone:
			params.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
		case sampler.ToolChoiceTool:
			params.ToolChoice = sdk.ToolChoiceParamOfTool(tc.Name)
		default:
			return params, nil, sampler.Invalid("/toolChoice/mode", "mode must be one of auto, required, none, tool")
		}
		if !tc.Parallel() {
			// At most one tool_use block; none takes no such option.
			off := param.NewOpt(true)
			switch u := &params.ToolChoice; {
			case u.OfAuto != nil:
				u.OfAuto.DisableParallelToolUse = off
			case u.OfAny != nil:
				u.OfAny.DisableParallelToolUse = off
			case u.OfTool != nil:
				u.OfTool.DisableParallelToolUse = off
			}
		}
	}
	return params, nil, nil
}

// userID returns the string member user_id of metadata, if it has one.
func userID(metadata json.RawMessage) (string, bool) {
	var m struct {
		UserID *string `json:"user_id"`
	}
	if len(metadata) == 0 || json.Unmarshal(metadata, &m) != nil || m.UserID == nil {
		return "", false
	}
	return *m.UserID, true
}

// toolSchema returns the input schema of the respond tool: schema itself
// when its root is an object schema ("type": "object"), else schema wrapped
// as the one required property "value" of an object.
func toolSchema(schema json.RawMessage) (json.RawMessage, bool) {
	var head struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(schema, &head) == nil && head.Type == "object" {
		return schema, false
	}
	wrapped, _ := json.Marshal(struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}{"object", map[string]json.RawMessage{"value": schema}, []string{"value"}})
	return wrapped, true
}

// messageParams maps the conversation. Blocks of blank text are left out
// (the API rejects them), and so are messages left with no block (the API
// joins consecutive messages of one role anyway).
func (p *Provider) messageParams(msgs []sampler.Message) ([]sdk.MessageParam, error) {
	out := make([]sdk.MessageParam, 0, len(msgs))
	for i, m := range msgs {
		var role sdk.MessageParamRole
		switch m.Role {
		case sampler.RoleUser:
			role = sdk.MessageParamRoleUser
		case sampler.RoleAssistant:
			role = sdk.MessageParamRoleAssistant
		default:
			return nil, sampler.Invalid(fmt.Sprintf("/messages/%d/role", i), "role must be user or assistant")
		}
		var blocks []sdk.ContentBlockParamUnion
		for j, c := range m.Content {
			at := fmt.Sprintf("/messages/%d/content/%d", i, j)
			b, ok, err := p.block(c, at)
			if err != nil {
				return nil, err
			}
			if ok {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) > 0 {
			out = append(out, sdk.MessageParam{Role: role, Content: blocks})
		}
	}
	return out, nil
}

// block maps one content block at path at; ok is false for a block that is
// left out.
func (p *Provider) block(c sampler.Content, at string) (b sdk.ContentBlockParamUnion, ok bool, err error) {
	switch c.Type {
	case sampler.BlockText:
		if blank(c.Text) {
			return b, false, nil
		}
		return sdk.ContentBlockParamUnion{OfText: &sdk.TextBlockParam{Text: c.Text}}, true, nil
	case sampler.BlockImage:
		img, err := p.image(c, at)
		if err != nil {
			return b, false, err
		}
		return sdk.ContentBlockParamUnion{OfImage: img}, true, nil
	case sampler.BlockAudio:
		return b, false, sampler.Invalid(at, "provider %s does not accept audio", p.name)
	case sampler.BlockToolUse:
		input := c.Input
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		} else if !json.Valid(input) {
			return b, false, sampler.Invalid(at+"/input", "input is not valid JSON")
		}
		return sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{ID: c.ID, Name: c.Name, Input: input}}, true, nil
	case sampler.BlockToolResult:
		tr, err := p.toolResult(c, at)
		if err != nil {
			return b, false, err
		}
		return sdk.ContentBlockParamUnion{OfToolResult: tr}, true, nil
	default:
		return b, false, sampler.Invalid(at+"/type", "provider %s does not accept content type %q here", p.name, c.Type)
	}
}

// image maps an image block.
func (p *Provider) image(c sampler.Content, at string) (*sdk.ImageBlockParam, error) {
	mt := strings.ToLower(strings.TrimSpace(c.MIMEType))
	if !imageType(mt) {
		return nil, sampler.Invalid(at, "provider %s does not accept image type %s", p.name, c.MIMEType)
	}
	return &sdk.ImageBlockParam{Source: sdk.ImageBlockParamSourceUnion{OfBase64: &sdk.Base64ImageSourceParam{
		Data:      c.Data,
		MediaType: sdk.Base64ImageSourceMediaType(mt),
	}}}, nil
}

// toolResult maps a tool_result block: its text and image blocks, then its
// structuredContent as one more text block. Resource links and embedded
// resources are passed as text holding their MCP JSON, so the model still
// sees them.
func (p *Provider) toolResult(c sampler.Content, at string) (*sdk.ToolResultBlockParam, error) {
	tr := &sdk.ToolResultBlockParam{ToolUseID: c.ToolUseID}
	if c.IsError != nil {
		tr.IsError = param.NewOpt(*c.IsError)
	}
	text := func(s string) {
		if !blank(s) {
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: s}})
		}
	}
	for k, inner := range c.Content {
		in := fmt.Sprintf("%s/content/%d", at, k)
		switch inner.Type {
		case sampler.BlockText:
			text(inner.Text)
		case sampler.BlockImage:
			img, err := p.image(inner, in)
			if err != nil {
				return nil, err
			}
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfImage: img})
		case sampler.BlockAudio:
			return nil, sampler.Invalid(in, "provider %s does not accept audio", p.name)
		case sampler.BlockResourceLink, sampler.BlockResource:
			raw, err := json.Marshal(inner)
			if err != nil {
				return nil, sampler.Invalid(in, "%s block cannot be encoded", inner.Type)
			}
			text(string(raw))
		default:
			return nil, sampler.Invalid(in+"/type", "provider %s does not accept content type %q in a tool result", p.name, inner.Type)
		}
	}
	text(c.StructuredText())
	return tr, nil
}

// blank reports whether s holds no visible text.
func blank(s string) bool { return strings.TrimSpace(s) == "" }
