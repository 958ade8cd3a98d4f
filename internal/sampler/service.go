package sampler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/telemetry"
)

// Method names of the sampling calls that check answers and correct them:
// the guaranteed helpers, and Sample in tools mode.
const (
	MethodSchema = "sampleSchema"
	MethodTools  = "sampleTools"
	MethodSample = "sample"
)

// Options configure a Service. Zero values mean the documented defaults.
type Options struct {
	Providers []Provider
	Catalog   *Catalog
	// Observer nil observes nothing.
	Observer Observer
	// Upstream retries failed provider calls.
	Upstream retry.Upstream
	// Validation bounds the corrective retries of the guaranteed helpers.
	Validation retry.Validation
	// DefaultMaxTokens applies when a request gives none; 0 means
	// DefaultMaxTokens.
	DefaultMaxTokens int
	// Schemas nil means a new cache of 512 schemas.
	Schemas *SchemaCache
	// CallTimeout bounds each upstream call, even one whose server accepted
	// the connection and then said nothing; 0 means 120 s.
	CallTimeout time.Duration
	// RequestTimeout bounds a whole request: every attempt, upstream retry,
	// wait and fallback; 0 means 5 minutes.
	RequestTimeout time.Duration
	// IdleTimeout bounds the wait for each fragment of a streamed call;
	// 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// DefaultMaxTokens is the maxTokens of a request that gives none, unless
// Options say otherwise.
const DefaultMaxTokens = 1024

// Service runs sampling requests against the configured providers.
type Service struct {
	providers        map[string]Provider
	catalog          *Catalog
	observe          Observer
	upstream         retry.Upstream
	validation       retry.Validation
	defaultMaxTokens int
	schemas          *SchemaCache
	callTimeout      time.Duration
	requestTimeout   time.Duration
	idleTimeout      time.Duration
}

// New checks that every catalog model has a provider and returns a Service.
func New(o Options) (*Service, error) {
	if o.Catalog == nil || len(o.Catalog.Models()) == 0 {
		return nil, errors.New("sampler: no models")
	}
	s := &Service{
		providers:        map[string]Provider{},
		catalog:          o.Catalog,
		observe:          o.Observer,
		upstream:         o.Upstream,
		validation:       o.Validation,
		defaultMaxTokens: o.DefaultMaxTokens,
		schemas:          o.Schemas,
		callTimeout:      o.CallTimeout,
		requestTimeout:   o.RequestTimeout,
		idleTimeout:      o.IdleTimeout,
	}
	if s.callTimeout <= 0 {
		s.callTimeout = 120 * time.Second
	}
	if s.requestTimeout <= 0 {
		s.requestTimeout = 5 * time.Minute
	}
	if s.idleTimeout <= 0 {
		s.idleTimeout = DefaultIdleTimeout
	}
	if s.observe == nil {
		s.observe = nopObserver{}
	}
	if s.defaultMaxTokens <= 0 {
		s.defaultMaxTokens = DefaultMaxTokens
	}
	if s.schemas == nil {
		s.schemas = NewSchemaCache(0)
	}
	for _, p := range o.Providers {
		s.providers[p.Name()] = p
	}
	for _, m := range o.Catalog.Models() {
		if _, ok := s.providers[m.Provider]; !ok {
			return nil, fmt.Errorf("sampler: model %q: provider %q is not configured", m.ID(), m.Provider)
		}
	}
	return s, nil
}

// Catalog returns the configured models.
func (s *Service) Catalog() *Catalog { return s.catalog }

// DefaultMaxTokens returns the maxTokens applied when a request gives none.
func (s *Service) DefaultMaxTokens() int { return s.defaultMaxTokens }

// Sample runs one attempt in the mode the params select. In schema mode a
// bad answer is reported in Result.ParseError, not retried.
//
// In tools mode the answer must keep the request's toolChoice: with none it
// calls no tool, with required (or a forced tool) it calls at least one (the
// forced one), and every call names a declared tool with arguments valid for
// its inputSchema. An answer that breaks a rule is corrected as the
// guaranteed helpers do (the failed turn and a corrective turn naming the
// errors are sent again), within the default number of validation retries;
// when they run out Sample returns an *ExhaustedError with Method
// MethodSample. Params.LenientToolCalls turns these checks off.
func (s *Service) Sample(ctx context.Context, p *Params) (*Result, error) {
	res, err := s.sample(ctx, p)
	s.sampled(ctx, p, res, err)
	return res, err
}

// sampled tells the observer how a request of p ended, after its answer.
func (s *Service) sampled(ctx context.Context, p *Params, res *Result, err error) {
	outcome, modelID := Outcome(ctx, res, err)
	caller, mode := p.Caller, p.Mode()
	AfterAnswer(ctx, func() { s.observe.Sampled(caller, mode, modelID, outcome) })
}

func (s *Service) sample(ctx context.Context, p *Params) (*Result, error) {
	if p.Mode() == ModeTools && !p.LenientToolCalls {
		return s.guaranteed(ctx, p, MethodSample)
	}
	start := time.Now()
	deadline := start.Add(s.requestTimeout)
	var up time.Duration
	defer func() { s.observe.Overhead(time.Since(start) - up) }()
	model, err := s.prepare(p)
	if err != nil {
		return nil, err
	}
	res, err := s.attempt(ctx, deadline, model, &p.Request, &up, p.deltas(1))
	if err != nil {
		return nil, err
	}
	if p.Mode() == ModeSchema {
		s.parse(res, &p.Request)
	}
	res.Attempts = 1
	res.Duration = time.Since(start)
	return res, nil
}

// SampleSchema samples in schema mode until the answer parses and
// validates, sending corrective feedback after each failure. It returns an
// *ExhaustedError when the attempts run out.
func (s *Service) SampleSchema(ctx context.Context, p *Params) (res *Result, err error) {
	switch {
	case len(p.Schema) == 0:
		err = Invalid("/schema", "schema is required")
	case len(p.Tools) > 0:
		err = Invalid("/tools", "schema and tools are mutually exclusive")
	default:
		res, err = s.guaranteed(ctx, p, MethodSchema)
	}
	s.sampled(ctx, p, res, err)
	return res, err
}

// SampleTools samples in tools mode until at least one valid tool call
// comes back: every call names a declared tool and its arguments validate
// against that tool's inputSchema. ToolChoice defaults to required.
func (s *Service) SampleTools(ctx context.Context, p *Params) (res *Result, err error) {
	if p.ToolChoice == nil || p.ToolChoice.Mode == "" {
		p.ToolChoice = &ToolChoice{Mode: ToolChoiceRequired}
	}
	switch {
	case len(p.Tools) == 0:
		err = Invalid("/tools", "tools are required")
	case len(p.Schema) > 0:
		err = Invalid("/schema", "schema and tools are mutually exclusive")
	case p.ToolChoice.Mode == ToolChoiceNone:
		err = Invalid("/toolChoice/mode", `toolChoice "none" cannot produce a tool call`)
	default:
		res, err = s.guaranteed(ctx, p, MethodTools)
	}
	s.sampled(ctx, p, res, err)
	return res, err
}

func (s *Service) guaranteed(ctx context.Context, p *Params, method string) (_ *Result, err error) {
	ctx, span := guaranteeSpan(ctx, method)
	answered := 0 // the attempts that came back with an answer
	defer func() { endGuaranteeSpan(span, answered, err) }()
	start := time.Now()
	deadline := start.Add(s.requestTimeout)
	var up time.Duration
	defer func() { s.observe.Overhead(time.Since(start) - up) }()
	attempts, err := s.validation.Attempts(p.Retries)
	if err != nil {
		return nil, Invalid("/retries", "%s", err.Error())
	}
	model, err := s.prepare(p)
	if err != nil {
		return nil, err
	}
	req := p.Request
	req.Messages = append([]Message(nil), p.Messages...)
	var usage Usage
	var last *Result
	var errs []FieldError
	for a := 1; a <= attempts; a++ {
		actx, aspan := attemptSpan(ctx, a)
		res, err := s.attempt(actx, deadline, model, &req, &up, p.deltas(a))
		if err != nil {
			telemetry.Fail(aspan, err, "")
			aspan.End()
			return nil, err
		}
		own := res.Usage
		usage = usage.Add(own)
		var kind string
		if method == MethodSchema {
			s.parse(res, &req)
			if res.ParseError != nil {
				errs = res.ParseError.Errors
				kind = KindSchemaMismatch
				if res.ParseError.Message == msgInvalidJSON {
					kind = KindInvalidJSON
				}
			}
		} else {
			kind, errs = s.checkToolCalls(res, &req, method == MethodTools)
		}
		res.Attempts = a
		res.Usage = usage
		res.Duration = time.Since(start)
		last = res
		answered = a
		if kind == "" {
			aspan.End()
			return res, nil
		}
		invalidAnswer(aspan, kind, errs)
		aspan.End()
		s.observe.AnswerInvalid(method, kind, a < attempts)
		if a < attempts {
			s.observe.Retried(method, own)
			fix := correction(res, errs, method, kind)
			req.Messages = append(req.Messages, fix...)
			if p.OnCorrection != nil {
				p.OnCorrection(a+1, fix[len(fix)-1])
			}
			if p.OnRetry != nil {
				p.OnRetry(a+1, errs)
			}
		}
	}
	s.observe.Exhausted(method)
	return nil, &ExhaustedError{Method: method, Attempts: attempts, LastResult: last, Errors: errs}
}

// Check applies the request checks of Sample without calling a provider:
// the model must be known and the messages, schema and tools valid.
func (s *Service) Check(p *Params) error {
	_, err := s.prepare(p)
	return err
}

// prepare checks the request and selects its model.
func (s *Service) prepare(p *Params) (Model, error) {
	var errs []FieldError
	model, err := s.catalog.Select(p.ModelSpec, p.ModelPreferences)
	if err != nil {
		errs = append(errs, FieldError{Path: "/model", Message: err.Error()})
	}
	errs = append(errs, checkRequest(p, s.schemas)...)
	return model, InvalidAll(errs)
}

// attempt calls the model, with upstream retries, and then its fallbacks,
// until deadline (the request's). Time spent waiting on providers is added
// to *upstream. With emit set the call streams; a call that fails once a
// fragment of it has been emitted is neither retried nor followed by a
// fallback, since the caller cannot take the fragment back.
func (s *Service) attempt(ctx context.Context, deadline time.Time, model Model, req *Request, upstream *time.Duration, emit func(Delta)) (*Result, error) {
	var lastErr error
	for i := 0; i <= len(model.Fallbacks); i++ {
		m := model
		if i > 0 {
			var err error
			if m, err = s.catalog.Lookup(model.Fallbacks[i-1]); err != nil {
				return nil, err
			}
		}
		prov := s.providers[m.Provider]
		r := *req
		r.Model = m.Name
		var resp *Response
		up := s.upstream
		up.Deadline = deadline
		up.OnRetry = func(err error, _ int, _ time.Duration) { s.observe.UpstreamRetry(m.Provider, retry.Reason(err)) }
		t0 := time.Now()
		emitted := false
		err := up.Do(ctx, func(ctx context.Context) error {
			var err error
			resp, err = s.call(ctx, deadline, prov, &r, emit, &emitted)
			if err != nil && emitted {
				err = partial(prov.Name(), err)
			}
			return err
		})
		// Calls and the waits between retries are upstream time, not
		// sampled's own.
		*upstream += time.Since(t0)
		if err == nil {
			return s.result(m, req, resp), nil
		}
		var ue *UpstreamError
		if errors.As(err, &ue) {
			ue.Model = m.ID()
		}
		lastErr = err
		if ctx.Err() != nil || !time.Now().Before(deadline) || !retry.Retryable(err) || emitted {
			break
		}
	}
	return nil, lastErr
}

// call runs one provider call under one deadline: the per-call timeout's,
// or the request's when that comes first. A call cut off by the per-call
// timeout, while the caller still waits, is an upstream timeout; one cut
// off by the request's deadline ends the request (the retries see it
// passed).
func (s *Service) call(ctx context.Context, deadline time.Time, prov Provider, req *Request, emit func(Delta), emitted *bool) (resp *Response, err error) {
	callDeadline := time.Now().Add(s.callTimeout)
	perCall := callDeadline.Before(deadline)
	if !perCall {
		callDeadline = deadline
	}
	cctx, cancel := context.WithDeadline(ctx, callDeadline)
	defer cancel()
	cctx, span := chatSpan(cctx, prov.Name(), req)
	defer func() { endChat(span, resp, err) }()
	if emit != nil {
		resp, err = s.stream(cctx, prov, req, emit, emitted)
	} else {
		resp, err = prov.Sample(cctx, req)
	}
	if err != nil && perCall && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		var ue *UpstreamError
		if !errors.As(err, &ue) || !ue.Timeout {
			return nil, &UpstreamError{Provider: prov.Name(), Timeout: true,
				Message: fmt.Sprintf("no answer within %s", s.callTimeout), Err: err}
		}
	}
	return resp, err
}

func (s *Service) result(m Model, req *Request, resp *Response) *Result {
	modelName := resp.Model
	if modelName == "" {
		modelName = m.Name
	}
	content := resp.Content
	if content == nil {
		content = []Content{}
	}
	if req.Mode() == ModeTools && !req.ToolChoice.Parallel() {
		content = firstCallOnly(content)
	}
	res := &Result{
		Model:      modelName,
		ModelID:    m.ID(),
		Provider:   m.Provider,
		Role:       RoleAssistant,
		Content:    content,
		Text:       TextOf(content),
		StopReason: resp.StopReason,
		Usage:      resp.Usage,
	}
	if req.Mode() == ModeTools {
		res.ToolCalls = ToolCallsOf(content)
		if res.ToolCalls == nil {
			res.ToolCalls = []ToolCall{}
		}
	}
	return res
}

const msgInvalidJSON = "the answer is not valid JSON"

// parse fills Parsed or ParseError of a schema-mode result.
func (s *Service) parse(res *Result, req *Request) {
	raw := extractJSON(res.Text)
	if !json.Valid(raw) {
		res.Parsed = json.RawMessage("null")
		res.ParseError = &ParseError{Message: msgInvalidJSON, RawText: res.Text,
			Errors: []FieldError{{Path: "/", Message: "expected one JSON value"}}}
		return
	}
	schema, err := s.schemas.Compile(req.Schema, "/schema")
	if err != nil {
		// Checked before the call; a cache eviction cannot make it fail.
		res.Parsed = json.RawMessage("null")
		res.ParseError = &ParseError{Message: err.Error(), RawText: res.Text, Errors: fieldErrors(err)}
		return
	}
	if errs := schema.Validate(raw); errs != nil {
		res.Parsed = json.RawMessage("null")
		res.ParseError = &ParseError{Message: "the answer does not match the schema", RawText: res.Text, Errors: errs}
		return
	}
	res.Parsed = raw
}

// extractJSON trims the answer and unwraps one Markdown code fence, which
// models often put around JSON.
func extractJSON(text string) json.RawMessage {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		t = strings.TrimSuffix(t, "```")
		if i := strings.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		} else {
			t = strings.TrimPrefix(t, "```")
		}
		t = strings.TrimSpace(t)
	}
	return json.RawMessage(t)
}

// checkToolCalls checks the tool calls of a tools-mode result against the
// request's toolChoice and tools, and returns the failure kind ("" when
// valid) and the errors by path. needCall requires a call whatever the
// toolChoice (the sampleTools helper).
func (s *Service) checkToolCalls(res *Result, req *Request, needCall bool) (string, []FieldError) {
	mode := req.ToolChoice.EffectiveMode()
	if len(res.ToolCalls) == 0 {
		switch {
		case mode == ToolChoiceTool:
			return KindNoToolCall, []FieldError{{Path: "/toolCalls", Message: fmt.Sprintf("no tool call; toolChoice requires a call of tool %q", req.ToolChoice.Name)}}
		case needCall || mode == ToolChoiceRequired:
			return KindNoToolCall, []FieldError{{Path: "/toolCalls", Message: "no tool call; call one of the declared tools"}}
		}
		return "", nil
	}
	if mode == ToolChoiceNone {
		errs := make([]FieldError, len(res.ToolCalls))
		for i := range res.ToolCalls {
			errs[i] = FieldError{Path: fmt.Sprintf("/toolCalls/%d", i), Message: `toolChoice is "none": no tool may be called; answer in text`}
		}
		return KindToolCallForbidden, errs
	}
	byName := make(map[string]*Tool, len(req.Tools))
	for i := range req.Tools {
		byName[req.Tools[i].Name] = &req.Tools[i]
	}
	kind := ""
	var errs []FieldError
	for i, call := range res.ToolCalls {
		at := fmt.Sprintf("/toolCalls/%d", i)
		t, ok := byName[call.Name]
		if !ok {
			if kind == "" {
				kind = KindUnknownTool
			}
			errs = append(errs, FieldError{Path: at + "/name", Message: fmt.Sprintf("unknown tool %q; declared tools: %s", call.Name, toolNames(req.Tools))})
			continue
		}
		if mode == ToolChoiceTool && call.Name != req.ToolChoice.Name {
			if kind == "" {
				kind = KindWrongTool
			}
			errs = append(errs, FieldError{Path: at + "/name", Message: fmt.Sprintf("toolChoice requires tool %q, not %q", req.ToolChoice.Name, call.Name)})
			continue
		}
		schema, err := s.schemas.Compile(t.InputSchema, "/tools")
		if err != nil {
			continue
		}
		for _, fe := range schema.Validate(call.Arguments) {
			if kind == "" {
				kind = KindInvalidArguments
			}
			path := at + "/arguments"
			if fe.Path != "/" {
				path += fe.Path
			}
			errs = append(errs, FieldError{Path: path, Message: fe.Message})
		}
	}
	return kind, errs
}

// firstCallOnly drops the tool_use blocks after the first: the answer to a
// request that disabled parallel tool use, from a provider that cannot be
// told so.
func firstCallOnly(content []Content) []Content {
	out := content[:0:0]
	seen := false
	for _, c := range content {
		if c.Type == BlockToolUse {
			if seen {
				continue
			}
			seen = true
		}
		out = append(out, c)
	}
	return out
}

func toolNames(tools []Tool) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// correction returns the failed assistant turn and the corrective user
// turn. When the failed turn called tools, each call is answered by an
// error tool_result (MCP requires every tool_use to be answered, and a user
// message of tool results holds nothing else); otherwise the user turn is
// text.
func correction(res *Result, errs []FieldError, method, kind string) []Message {
	var list bytes.Buffer
	for _, e := range errs {
		fmt.Fprintf(&list, "\n- %s: %s", e.Path, e.Message)
	}
	assistant := AssistantMessage(res.Content...)
	if len(res.Content) == 0 {
		assistant.Content = []Content{TextBlock("")}
	}
	calls := ToolCallsOf(res.Content)
	if len(calls) == 0 {
		var text string
		if method == MethodSchema {
			text = "Your previous answer is not acceptable. Fix these errors and answer again with only the corrected JSON value, no other text:" + list.String()
		} else {
			text = "Your previous answer did not call a tool. Fix these errors and answer by calling one of the declared tools with arguments that match its input schema:" + list.String()
		}
		return []Message{assistant, UserMessage(TextBlock(text))}
	}
	isErr := true
	results := make([]Content, len(calls))
	for i, c := range calls {
		prefix := fmt.Sprintf("/toolCalls/%d", i)
		var own bytes.Buffer
		for _, e := range errs {
			if strings.HasPrefix(e.Path, prefix+"/") || e.Path == prefix {
				fmt.Fprintf(&own, "\n- %s: %s", e.Path, e.Message)
			}
		}
		text := "Not executed: another call of this turn was invalid. Fix these errors and call the tools again:" + list.String()
		switch {
		case kind == KindToolCallForbidden:
			text = "Not executed: no tool may be called in this answer. Answer in text, without calling a tool."
		case own.Len() > 0:
			text = "Invalid tool call. Fix these errors and call the tool again with arguments that match its input schema:" + own.String()
		}
		results[i] = Content{Type: BlockToolResult, ToolUseID: c.ID, IsError: &isErr, Content: []Content{TextBlock(text)}}
	}
	return []Message{assistant, UserMessage(results...)}
}
