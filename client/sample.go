package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Stop reasons of MCP's CreateMessageResult. A provider's own string comes
// through when nothing maps.
const (
	StopEndTurn      = "endTurn"
	StopStopSequence = "stopSequence"
	StopMaxTokens    = "maxTokens"
	StopToolUse      = "toolUse"
	StopRefusal      = "refusal"
	StopOther        = "other"
)

// SampleRequest is the body of POST /v1/sample and its guaranteed helpers.
// Give Prompt or Messages, not both. Zero fields are left out and take the
// service's defaults.
type SampleRequest struct {
	// Prompt is shorthand for one user message holding one text block.
	Prompt string `json:"prompt,omitempty"`
	// Messages is the conversation.
	Messages      []Message `json:"messages,omitempty"`
	SystemPrompt  string    `json:"systemPrompt,omitempty"`
	MaxTokens     int       `json:"maxTokens,omitempty"`
	Temperature   *float64  `json:"temperature,omitempty"`
	StopSequences []string  `json:"stopSequences,omitempty"`
	// Metadata is passed through to the provider.
	Metadata         map[string]any    `json:"metadata,omitempty"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	// Model names a model, "provider/model" or an alias (GET /v1/models);
	// it wins over ModelPreferences. Empty means the preferences, else the
	// default model.
	Model string `json:"model,omitempty"`
	// Schema, a JSON Schema, selects schema mode: anything that encodes as
	// one (a *jsonschema.Schema, a map, a json.RawMessage). SampleSchema
	// fills it from its type parameter when nil.
	Schema any `json:"schema,omitempty"`
	// Tools select tools mode.
	Tools      []Tool      `json:"tools,omitempty"`
	ToolChoice *ToolChoice `json:"toolChoice,omitempty"`
	// Retries is the most corrective retries of SampleSchema and
	// SampleTools after the first attempt; nil means the service's default
	// (2). Sample refuses it.
	Retries *int `json:"retries,omitempty"`
}

// Tool is MCP's Tool definition, as a request declares it.
type Tool struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the tool's arguments, an object
	// schema: anything that encodes as one. SampleTools fills a nil one
	// from its type parameter; ToolFor derives it from a Go type.
	InputSchema any `json:"inputSchema"`
	// Annotations and Meta are MCP's ToolAnnotations and _meta; nil leaves
	// them out.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Meta        json.RawMessage `json:"_meta,omitempty"`
}

// ToolFor returns a tool whose InputSchema is derived from the Go type A
// with jsonschema.For: a struct's fields are its properties (named as
// encoding/json names them, required unless tagged omitempty or omitzero,
// described by a `jsonschema:"…"` tag) and no others are allowed.
func ToolFor[A any](name, description string) (Tool, error) {
	s, err := jsonschema.For[A](nil)
	if err != nil {
		return Tool{}, fmt.Errorf("client: tool %s: %w", name, err)
	}
	return Tool{Name: name, Description: description, InputSchema: s}, nil
}

// Tool choice modes: MCP's auto, required and none, and sampled's
// extension tool, which forces the tool named in ToolChoice.Name.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceNone     = "none"
	ToolChoiceTool     = "tool"
)

// ToolChoice says how the model may use tools. nil in a request means auto
// (required for SampleTools).
type ToolChoice struct {
	Mode string `json:"mode"`
	// Name is the tool to call, with Mode ToolChoiceTool only.
	Name string `json:"name,omitempty"`
}

// ModelPreferences are MCP's model preferences, used when a request names
// no Model. Nil priorities are left out.
type ModelPreferences struct {
	Hints                []ModelHint `json:"hints,omitempty"`
	CostPriority         *float64    `json:"costPriority,omitempty"`
	SpeedPriority        *float64    `json:"speedPriority,omitempty"`
	IntelligencePriority *float64    `json:"intelligencePriority,omitempty"`
}

// ModelHint is a substring of the model IDs a request prefers.
type ModelHint struct {
	Name string `json:"name"`
}

// Usage counts tokens, summed over all attempts, and what they cost.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	// CachedInputTokens are the part of InputTokens read from the
	// provider's prompt cache, where it reports them.
	CachedInputTokens int `json:"cachedInputTokens,omitempty"`
	// CostUSD is the cost in US dollars at the service's configured
	// prices; Unpriced says a model without a price was called.
	CostUSD  float64 `json:"costUsd"`
	Unpriced bool    `json:"unpriced,omitempty"`
}

// ParseError says why a schema-mode answer is not a valid value.
type ParseError struct {
	Message string `json:"message"`
	// RawText is the answer's text as the model gave it.
	RawText string       `json:"rawText"`
	Errors  []FieldError `json:"errors"`
}

// ToolCall is a tool call of an answer. In a Result and in events the
// arguments are the JSON the model gave (A is json.RawMessage); in a
// ToolsResult they are decoded into SampleTools' type parameter.
type ToolCall[A any] struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments A      `json:"arguments"`
}

// Result is the answer of Sample and, in the typed results, of the
// guaranteed helpers.
type Result struct {
	// Model is the model name the provider reported; Provider the
	// provider's.
	Model      string    `json:"model"`
	Provider   string    `json:"provider"`
	Role       Role      `json:"role"`
	Content    []Content `json:"content"`
	Text       string    `json:"text"`
	StopReason string    `json:"stopReason"`
	Usage      Usage     `json:"usage"`
	// Attempts is how many attempts the answer took (1 for Sample).
	Attempts   int   `json:"attempts"`
	DurationMs int64 `json:"durationMs"`
	// Parsed is, in schema mode, the answer as JSON: a value that
	// validates, or null with ParseError saying why not. Nil in other
	// modes.
	Parsed     json.RawMessage `json:"parsed"`
	ParseError *ParseError     `json:"parseError"`
	// ToolCalls are, in tools mode, the tool calls of the answer.
	ToolCalls []ToolCall[json.RawMessage] `json:"toolCalls"`
}

// SchemaResult is the answer of SampleSchema: the Result and its parsed
// value decoded into T. (Result.Parsed keeps the JSON.)
type SchemaResult[T any] struct {
	Result
	Parsed T
}

// ToolsResult is the answer of SampleTools: the Result and its tool calls
// with their arguments decoded into A. (Result.ToolCalls keeps the JSON.)
type ToolsResult[A any] struct {
	Result
	ToolCalls []ToolCall[A]
}

// Sample runs one sampling request (POST /v1/sample): plain, schema or
// tools mode as req says, one attempt. An answer that does not validate is
// reported in Result.ParseError, not as an error; req.Retries must be nil.
func (c *Client) Sample(ctx context.Context, req *SampleRequest) (*Result, error) {
	var res Result
	if err := c.do(ctx, http.MethodPost, "v1/sample", nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SampleSchema asks for a value of type T (POST /v1/sample/schema): the
// service retries with corrective feedback until the answer validates
// against the schema, then the value is decoded into Parsed. The schema is
// req.Schema when set (it should describe values T can hold), else the one
// jsonschema.For derives from T. req is not modified.
//
// When the attempts run out the error is a *ValidationError holding the last
// answer; other failures are a *Problem, a transport or context error, or a
// decoding error when the value does not fit T.
func SampleSchema[T any](ctx context.Context, c *Client, req *SampleRequest) (*SchemaResult[T], error) {
	r := *req
	if r.Schema == nil {
		s, err := jsonschema.For[T](nil)
		if err != nil {
			return nil, fmt.Errorf("client: schema of %T: %w", *new(T), err)
		}
		r.Schema = s
	}
	var res Result
	if err := c.do(ctx, http.MethodPost, "v1/sample/schema", nil, &r, &res); err != nil {
		return nil, err
	}
	out := &SchemaResult[T]{Result: res}
	if err := json.Unmarshal(res.Parsed, &out.Parsed); err != nil {
		return nil, fmt.Errorf("client: decode the parsed value into %T: %w", out.Parsed, err)
	}
	return out, nil
}

// SampleTools asks for at least one valid tool call (POST
// /v1/sample/tools): the service retries with corrective feedback until
// every call of the answer names a declared tool with arguments valid
// against its input schema. The arguments of each call are decoded into A:
// a struct when the tools take the same arguments (a declared tool with a
// nil InputSchema gets the schema jsonschema.For derives from A), or
// json.RawMessage to decode them by tool name. The tool choice defaults to
// required. req is not modified.
//
// Errors are as for SampleSchema.
func SampleTools[A any](ctx context.Context, c *Client, req *SampleRequest) (*ToolsResult[A], error) {
	r := *req
	r.Tools = append([]Tool(nil), req.Tools...)
	for i := range r.Tools {
		if r.Tools[i].InputSchema != nil {
			continue
		}
		s, err := jsonschema.For[A](nil)
		if err != nil {
			return nil, fmt.Errorf("client: tool %s: schema of %T: %w", r.Tools[i].Name, *new(A), err)
		}
		r.Tools[i].InputSchema = s
	}
	var res Result
	if err := c.do(ctx, http.MethodPost, "v1/sample/tools", nil, &r, &res); err != nil {
		return nil, err
	}
	out := &ToolsResult[A]{Result: res, ToolCalls: make([]ToolCall[A], len(res.ToolCalls))}
	for i, tc := range res.ToolCalls {
		out.ToolCalls[i] = ToolCall[A]{ID: tc.ID, Name: tc.Name}
		if err := json.Unmarshal(tc.Arguments, &out.ToolCalls[i].Arguments); err != nil {
			return nil, fmt.Errorf("client: decode the arguments of %s into %T: %w", tc.Name, out.ToolCalls[i].Arguments, err)
		}
	}
	return out, nil
}

// CreateMessageParams are MCP's CreateMessageRequest params (revision
// 2025-11-25, with tools), the body of POST /v1/messages. MaxTokens is
// required, as in MCP.
type CreateMessageParams struct {
	Messages         []Message         `json:"messages"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	// IncludeContext is accepted and ignored by the service.
	IncludeContext string         `json:"includeContext,omitempty"`
	Temperature    *float64       `json:"temperature,omitempty"`
	MaxTokens      int            `json:"maxTokens"`
	StopSequences  []string       `json:"stopSequences,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	Tools          []Tool         `json:"tools,omitempty"`
	ToolChoice     *ToolChoice    `json:"toolChoice,omitempty"`
	// Meta is MCP's _meta; nil leaves it out.
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// CreateMessageResult is MCP's CreateMessageResult.
type CreateMessageResult struct {
	Role Role
	// Content holds the answer's blocks (MCP sends one bare block when
	// there is one; it is read as a slice of one).
	Content    []Content
	Model      string
	StopReason string
	Meta       json.RawMessage
}

// UnmarshalJSON accepts content as one block or an array of blocks.
func (r *CreateMessageResult) UnmarshalJSON(b []byte) error {
	var w struct {
		Role       Role            `json:"role"`
		Content    json.RawMessage `json:"content"`
		Model      string          `json:"model"`
		StopReason string          `json:"stopReason"`
		Meta       json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	blocks, err := decodeBlocks(w.Content)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	*r = CreateMessageResult{Role: w.Role, Content: blocks, Model: w.Model, StopReason: w.StopReason, Meta: w.Meta}
	return nil
}

// Text returns the text blocks of the result joined by newlines.
func (r *CreateMessageResult) Text() string {
	var texts []string
	for _, c := range r.Content {
		if c.Type == BlockText {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Messages sends MCP's sampling/createMessage params as they are (POST
// /v1/messages) and returns MCP's result. Problems of invalid params carry
// JSON-RPC's code -32602 in Problem.Extensions["code"].
func (c *Client) Messages(ctx context.Context, params *CreateMessageParams) (*CreateMessageResult, error) {
	var res CreateMessageResult
	if err := c.do(ctx, http.MethodPost, "v1/messages", nil, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
