package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sampled/sampled/internal/sampler"
)

// sampleBody is the body of POST /v1/sample and its guaranteed helpers.
type sampleBody struct {
	Prompt           *string                   `json:"prompt"`
	Messages         []json.RawMessage         `json:"messages"`
	SystemPrompt     string                    `json:"systemPrompt"`
	MaxTokens        *int                      `json:"maxTokens"`
	Temperature      *float64                  `json:"temperature"`
	StopSequences    []json.RawMessage         `json:"stopSequences"`
	Metadata         json.RawMessage           `json:"metadata"`
	ModelPreferences *sampler.ModelPreferences `json:"modelPreferences"`
	Model            string                    `json:"model"`
	Schema           json.RawMessage           `json:"schema"`
	Tools            []json.RawMessage         `json:"tools"`
	// ToolChoice and the draft spelling ToolChoiceDraft, accepted on
	// input, are sampler.ToolChoice, which decodes itself (see decodeAt).
	ToolChoice      json.RawMessage `json:"toolChoice"`
	ToolChoiceDraft json.RawMessage `json:"tool_choice"`
	Retries         *int            `json:"retries"`
	// Stream asks for the answer as an event stream (live).
	Stream bool `json:"stream"`
}

// resultBody is the body of a 200 response of POST /v1/sample and its
// helpers, and the lastResult of their 422 problems.
type resultBody struct {
	Model      string              `json:"model"`
	Provider   string              `json:"provider"`
	Role       sampler.Role        `json:"role"`
	Content    any                 `json:"content"` // answerContent
	Text       string              `json:"text"`
	StopReason string              `json:"stopReason,omitempty"`
	Usage      sampler.Usage       `json:"usage"`
	Attempts   int                 `json:"attempts"`
	DurationMs int64               `json:"durationMs"`
	Parsed     json.RawMessage     `json:"parsed,omitzero"`
	ParseError *sampler.ParseError `json:"parseError,omitempty"`
	ToolCalls  []sampler.ToolCall  `json:"toolCalls,omitzero"`
}

func newResultBody(res *sampler.Result) *resultBody {
	if res == nil {
		return nil
	}
	return &resultBody{Model: res.Model, Provider: res.Provider, Role: res.Role, Content: answerContent(res.Content), Text: res.Text,
		StopReason: res.StopReason, Usage: res.Usage, Attempts: res.Attempts, DurationMs: res.Duration.Milliseconds(),
		Parsed: res.Parsed, ParseError: res.ParseError, ToolCalls: res.ToolCalls}
}

// answerContent is an answer's blocks as a body holds them: in their wire
// form (sampler.WireBlocks), which encoding/json writes without reading it
// again, or as they are when one keeps members of its own.
func answerContent(blocks []sampler.Content) any {
	if blocks == nil {
		return blocks
	}
	if w := sampler.WireBlocks(blocks); w != nil {
		return w
	}
	return blocks
}

// params checks the body's own rules and converts it for the domain.
func (b *sampleBody) params(defaultMaxTokens int, endpoint string) (*sampler.Params, error) {
	tools, errs := decodeItems[sampler.Tool]("tools", b.Tools)
	stops, stopErrs := decodeItems[string]("stopSequences", b.StopSequences)
	errs = append(errs, stopErrs...)
	var choice, draft *sampler.ToolChoice
	errs = append(errs, decodeAt("/toolChoice", b.ToolChoice, &choice)...)
	errs = append(errs, decodeAt("/tool_choice", b.ToolChoiceDraft, &draft)...)
	add := func(path, format string, args ...any) {
		errs = append(errs, sampler.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case b.Prompt == nil && b.Messages == nil:
		add("/prompt", "give either prompt or messages")
	case b.Prompt != nil && b.Messages != nil:
		add("/prompt", "give either prompt or messages, not both")
	case b.Prompt != nil && *b.Prompt == "":
		add("/prompt", "prompt must not be empty")
	}
	if b.Retries != nil && endpoint == "sample" {
		add("/retries", "retries applies to /v1/sample/schema and /v1/sample/tools only")
	}
	if choice != nil && draft != nil {
		add("/tool_choice", "give toolChoice or tool_choice, not both")
	}
	if len(b.Schema) > 0 && string(b.Schema) == "null" {
		b.Schema = nil
	}
	p := &sampler.Params{
		Request: sampler.Request{
			SystemPrompt:  b.SystemPrompt,
			MaxTokens:     defaultMaxTokens,
			Temperature:   b.Temperature,
			StopSequences: stops,
			Metadata:      b.Metadata,
			Schema:        b.Schema,
			Tools:         tools,
			ToolChoice:    choice,
		},
		ModelSpec:        b.Model,
		ModelPreferences: b.ModelPreferences,
		Retries:          b.Retries,
	}
	if b.MaxTokens != nil {
		p.MaxTokens = *b.MaxTokens
	}
	if p.ToolChoice == nil {
		p.ToolChoice = draft
	}
	if b.Prompt != nil {
		p.Messages = []sampler.Message{sampler.UserMessage(sampler.TextBlock(*b.Prompt))}
	}
	if b.Messages != nil {
		msgs, err := sampler.DecodeMessages(b.Messages)
		if err != nil {
			errs = append(errs, err.(*sampler.InvalidError).Errors...)
		}
		p.Messages = msgs
	}
	if len(errs) > 0 {
		return nil, sampler.InvalidAll(errs)
	}
	return p, nil
}

type sampleFunc func(ctx context.Context, p *sampler.Params) (*sampler.Result, error)

func (s *server) serveSample(w http.ResponseWriter, r *http.Request, endpoint string, run sampleFunc) {
	var body sampleBody
	if err := s.decodeBody(w, r, &body, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := body.params(s.sampler.DefaultMaxTokens(), endpoint)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.Caller = endpoint
	if wantsStream(r, body.Stream) {
		l := &live{eventStream: eventStream{s: s, w: w, r: r}}
		l.stream(p)
		res, err := run(r.Context(), p)
		l.finish(newResultBody(res), err)
		s.sampled(r.Context(), p, res, err)
		return
	}
	res, err := run(r.Context(), p)
	setCost(w, res, err)
	// The answer is sent first (writeBody flushes it); the log line's
	// attributes come after.
	if err != nil {
		s.writeError(w, r, err)
	} else {
		s.writeJSON(w, http.StatusOK, newResultBody(res))
	}
	s.sampled(r.Context(), p, res, err)
}

func (s *server) handleSample(w http.ResponseWriter, r *http.Request) {
	s.serveSample(w, r, "sample", s.sampler.Sample)
}

func (s *server) handleSampleSchema(w http.ResponseWriter, r *http.Request) {
	s.serveSample(w, r, "sample_schema", s.sampler.SampleSchema)
}

func (s *server) handleSampleTools(w http.ResponseWriter, r *http.Request) {
	s.serveSample(w, r, "sample_tools", s.sampler.SampleTools)
}

// sampled adds the outcome of a finished sampling request (never the
// prompt) to the request's log line; the sampling service counted it.
func (s *server) sampled(ctx context.Context, p *sampler.Params, res *sampler.Result, err error) {
	outcome, _ := sampler.Outcome(ctx, res, err)
	mode := p.Mode()
	var buf [6]slog.Attr // addLog copies them: no allocation
	attrs := append(buf[:0], slog.String("endpoint", p.Caller), slog.String("mode", mode), slog.String("outcome", outcome))
	var ex *sampler.ExhaustedError
	switch {
	case err == nil:
		attrs = append(attrs, slog.String("provider", res.Provider), slog.String("model", res.Model), slog.Int("attempts", res.Attempts))
	case errors.As(err, &ex):
		if ex.LastResult != nil {
			attrs = append(attrs, slog.String("provider", ex.LastResult.Provider), slog.String("model", ex.LastResult.Model))
		}
		attrs = append(attrs, slog.Int("attempts", ex.Attempts))
	default:
		attrs = append(attrs, slog.String("error", clip(err.Error(), maxEchoBytes)))
	}
	addLog(ctx, attrs...)
}
