package sampler

import (
	"encoding/json"
	"fmt"
	"sort"
)

// CreateMessageParams is MCP's CreateMessageRequestParams (2025-11-25).
// Members the schema does not define are kept in Extra: MCP leaves the
// params open, and extensions (a client-run loop's maxIterations) live
// there.
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
	// Extra holds every other member by name, as it was received.
	Extra map[string]json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the params as the 2025-11-25 schema types them:
// every member has its JSON type (toolChoice is an object, metadata an
// object, maxTokens an integer), and every block of the messages has the
// members its type requires. An error is an *InvalidError naming each bad
// member by its JSON Pointer, e.g. /messages/2/content/0/text.
func (p *CreateMessageParams) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return Invalid("/", "the params must be a JSON object")
	}
	*p = CreateMessageParams{}
	var errs []FieldError
	bad := func(path, msg string) { errs = append(errs, FieldError{Path: path, Message: msg}) }
	// into decodes v into dst when v has the JSON kind the schema wants.
	into := func(k string, v json.RawMessage, kind string, dst any) {
		if !jsonKindIs(v, kind) {
			bad("/"+k, fmt.Sprintf("%s must be %s", k, kindName(kind)))
			return
		}
		if err := json.Unmarshal(v, dst); err != nil {
			pe := pathOf(err, fmt.Sprintf("%s must be %s", k, kindName(kind))).under("/" + k)
			bad(pe.Path, pe.Message)
		}
	}
	for k, v := range m {
		switch k {
		case "messages":
			var raw []json.RawMessage
			if !jsonKindIs(v, "array") || json.Unmarshal(v, &raw) != nil {
				bad("/messages", "messages must be an array")
				continue
			}
			msgs, err := DecodeMessages(raw)
			if err != nil {
				errs = append(errs, fieldErrors(err)...)
			}
			p.Messages = msgs
			if p.Messages == nil {
				p.Messages = []Message{}
			}
		case "modelPreferences":
			into(k, v, "object", &p.ModelPreferences)
		case "systemPrompt":
			into(k, v, "string", &p.SystemPrompt)
		case "includeContext":
			into(k, v, "string", &p.IncludeContext)
		case "temperature":
			if !jsonKindIs(v, "number") || json.Unmarshal(v, &p.Temperature) != nil {
				bad("/temperature", "temperature must be a number")
			}
		case "maxTokens":
			if !jsonKindIs(v, "number") || json.Unmarshal(v, &p.MaxTokens) != nil {
				bad("/maxTokens", "maxTokens must be an integer")
			}
		case "stopSequences":
			var raw []json.RawMessage
			if into(k, v, "array", &raw); raw != nil {
				p.StopSequences = make([]string, len(raw))
			}
			for i, s := range raw {
				if !jsonKindIs(s, "string") || json.Unmarshal(s, &p.StopSequences[i]) != nil {
					bad(fmt.Sprintf("/stopSequences/%d", i), "a stop sequence must be a string")
				}
			}
		case "metadata":
			into(k, v, "object", &p.Metadata)
		case "tools":
			var raw []json.RawMessage
			if !jsonKindIs(v, "array") || json.Unmarshal(v, &raw) != nil {
				bad("/tools", "tools must be an array")
				continue
			}
			p.Tools = make([]Tool, len(raw))
			for i, item := range raw {
				errs = append(errs, decodeTool(fmt.Sprintf("/tools/%d", i), item, &p.Tools[i])...)
			}
		case "toolChoice":
			// The string shorthand of the REST API is not MCP's.
			into(k, v, "object", &p.ToolChoice)
		case "task":
			var task struct {
				TTL *int64 `json:"ttl"`
			}
			into(k, v, "object", &task)
			p.Task = v
		case "_meta":
			var meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			}
			into(k, v, "object", &meta)
			if t := meta.ProgressToken; t != nil && !jsonKindIs(t, "string") && !jsonKindIs(t, "number") {
				bad("/_meta/progressToken", "progressToken must be a string or an integer")
			}
			p.Meta = v
		default:
			if p.Extra == nil {
				p.Extra = map[string]json.RawMessage{}
			}
			p.Extra[k] = v
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
	return InvalidAll(errs)
}

// decodeTool decodes one MCP Tool at path: name a string, inputSchema an
// object, both required.
func decodeTool(path string, raw json.RawMessage, t *Tool) []FieldError {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return []FieldError{{Path: path, Message: "a tool must be an object"}}
	}
	var errs []FieldError
	for _, k := range []string{"name", "inputSchema"} {
		kind := "string"
		if k == "inputSchema" {
			kind = "object"
		}
		if v, ok := m[k]; !ok {
			errs = append(errs, FieldError{Path: path + "/" + k, Message: k + " is required"})
		} else if !jsonKindIs(v, kind) {
			errs = append(errs, FieldError{Path: path + "/" + k, Message: fmt.Sprintf("%s must be %s", k, kindName(kind))})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if err := json.Unmarshal(raw, t); err != nil {
		pe := pathOf(err, "not a valid tool").under(path)
		return []FieldError{{Path: pe.Path, Message: pe.Message}}
	}
	return nil
}

// MarshalJSON writes the params with the members kept in Extra.
func (p CreateMessageParams) MarshalJSON() ([]byte, error) {
	type plain CreateMessageParams
	b, err := json.Marshal(plain(p))
	if err != nil || len(p.Extra) == 0 {
		return b, err
	}
	return withExtra(b, p.Extra)
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
// Without tools in the request (res.ToolCalls nil) the content is one block,
// as MCP clients of 2025-11-25 expect there: the text blocks joined into one
// (see TextOf), or the first block when there is no text.
func CreateMessageResultOf(res *Result) CreateMessageResult {
	out := CreateMessageResult{Role: res.Role, Content: res.Content, Model: res.Model, StopReason: res.StopReason}
	switch {
	case len(out.Content) == 0:
		out.Content = []Content{TextBlock("")}
	case res.ToolCalls == nil && len(out.Content) > 1:
		out.Content = []Content{out.Content[0]}
		for _, c := range res.Content {
			if c.Type == BlockText {
				out.Content = []Content{TextBlock(TextOf(res.Content))}
				break
			}
		}
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
