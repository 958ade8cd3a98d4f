// Package sampler is the domain of sampled: MCP sampling types, the Provider
// seam to LLM backends, request validation, model selection and the three
// sampling modes (plain, schema, tools) with their guaranteed variants.
package sampler

import (
	"context"
	"encoding/json"
	"time"
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

// Result is the answer of a sampling request.
type Result struct {
	// Model is the model name the provider reports; ModelID the configured
	// model ("provider/model") that answered, a fallback perhaps.
	Model      string
	ModelID    string
	Provider   string
	Role       Role
	Content    []Content
	Text       string
	StopReason string
	Usage      Usage
	// Attempts counts the model calls of a guaranteed helper or of Sample
	// in tools mode, corrective retries included (1 otherwise).
	Attempts int
	Duration time.Duration
	// Parsed is the parsed value in schema mode; JSON null when parsing or
	// validation failed (ParseError says why). Nil in other modes.
	Parsed     json.RawMessage
	ParseError *ParseError
	// ToolCalls is non-nil (possibly empty) in tools mode only.
	ToolCalls []ToolCall
}

// deltas returns the emit function of attempt a, nil when p streams not.
func (p *Params) deltas(a int) func(Delta) {
	if p.OnDelta == nil {
		return nil
	}
	return func(d Delta) {
		d.Attempt = a
		p.OnDelta(d)
	}
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

// Params is a sampling request as callers hand it to the Service.
type Params struct {
	Request
	// ModelSpec is an explicit "provider/model" or alias; empty lets
	// ModelPreferences or the default choose.
	ModelSpec        string
	ModelPreferences *ModelPreferences
	// Retries bounds the corrective retries of a guaranteed helper, and of
	// Sample in tools mode; nil means the default (2).
	Retries *int
	// OnRetry, if set, is called before each corrective retry with the
	// attempt about to be made (from 2) and the errors it corrects: a
	// caller that reports progress reports retries too.
	OnRetry func(attempt int, errs []FieldError)
	// OnCorrection, if set, is called before OnRetry with the same
	// attempt and the corrective user turn sent before it: a caller that
	// shows a retry can show what the model was told.
	OnCorrection func(attempt int, turn Message)
	// OnDelta, if set, streams the answer: each fragment is handed to it as
	// it arrives, on the goroutine that called the Service, tagged with its
	// attempt. Deltas of an attempt that fails validation are followed by
	// OnRetry and the next attempt's deltas.
	OnDelta func(Delta)
	// LenientToolCalls turns off Sample's checks of a tools-mode answer
	// (toolChoice kept, tools declared, arguments valid), for a caller that
	// handles such answers itself: the loop engine answers a bad call with
	// an error tool_result the model reads, and stops at maxIterations when
	// the model still calls tools on its last iteration.
	LenientToolCalls bool
	// Caller names who asks (an endpoint, the loop engine, the MCP host)
	// to the Observer when the request ends (Observer.Sampled).
	Caller string
}
