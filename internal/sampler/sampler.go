// Package sampler is the domain of sampled: MCP sampling types, the Provider
// seam to LLM backends, request validation, model selection and the three
// sampling modes (plain, schema, tools) with their guaranteed variants.
package sampler

import (
	"context"
	"encoding/json"
)

// Provider is an LLM backend. Implementations live in subpackages, map
// Request to their wire format and never retry on their own: a failed call
// returns an *UpstreamError and retries happen in the Service.
type Provider interface {
	// Name is the provider's configured name, the part before "/" in a model ID.
	Name() string
	// Sample runs one model call.
	Sample(ctx context.Context, req *Request) (*Response, error)
}

// Request is one model call as a Provider receives it. The mode follows from
// the fields: Schema set means structured output, Tools set means tool
// calling; never both.
type Request struct {
	// Model is the provider's own model name (the part after "/").
	Model         string
	Messages      []Message
	SystemPrompt  string
	MaxTokens     int
	Temperature   *float64
	StopSequences []string
	Metadata      json.RawMessage
	// Schema is a JSON Schema the answer must satisfy.
	Schema json.RawMessage
	Tools  []Tool
	// ToolChoice nil means auto.
	ToolChoice *ToolChoice
	// Attempt counts the attempts of a guaranteed helper, from 1.
	Attempt int
}

// Mode names the sampling mode of a request: "plain", "schema" or "tools".
func (r *Request) Mode() string {
	switch {
	case len(r.Schema) > 0:
		return ModeSchema
	case len(r.Tools) > 0:
		return ModeTools
	default:
		return ModePlain
	}
}

// Sampling modes.
const (
	ModePlain  = "plain"
	ModeSchema = "schema"
	ModeTools  = "tools"
)

// Response is what a Provider returns for one call.
type Response struct {
	// Model is the model name the provider reports.
	Model      string
	Content    []Content
	StopReason string
	Usage      Usage
}

// Result is the answer of the sampling service, the body of a 200 response
// of POST /v1/sample and its helpers.
type Result struct {
	Model      string    `json:"model"`
	Provider   string    `json:"provider"`
	Role       Role      `json:"role"`
	Content    []Content `json:"content"`
	Text       string    `json:"text"`
	StopReason string    `json:"stopReason,omitempty"`
	Usage      Usage     `json:"usage"`
	Attempts   int       `json:"attempts"`
	DurationMs int64     `json:"durationMs"`
	// Parsed is the parsed value in schema mode; JSON null when parsing or
	// validation failed. Absent in other modes.
	Parsed     json.RawMessage `json:"parsed,omitzero"`
	ParseError *ParseError     `json:"parseError,omitempty"`
	// ToolCalls is set (possibly empty) in tools mode only.
	ToolCalls []ToolCall `json:"toolCalls,omitzero"`
}

// ParseError says why schema-mode output is not a valid value.
type ParseError struct {
	Message string       `json:"message"`
	RawText string       `json:"rawText"`
	Errors  []FieldError `json:"errors"`
}

// FieldError is one problem at a JSON Pointer path.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Params is a sampling request as the HTTP layer hands it to the Service.
type Params struct {
	Request
	// ModelSpec is an explicit "provider/model" or alias; empty lets
	// ModelPreferences or the default choose.
	ModelSpec        string
	ModelPreferences *ModelPreferences
	// Retries bounds the corrective retries of a guaranteed helper; nil
	// means the default (2).
	Retries *int
	// Endpoint labels metrics: "sample", "sample_schema", "sample_tools",
	// "messages".
	Endpoint string
}
