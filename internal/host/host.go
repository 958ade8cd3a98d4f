// Package host makes sampled the sampling client of the MCP servers it
// connects to: it answers their sampling/createMessage requests (which
// internal/tools receives on its client sessions) with sampled's own
// sampling service, under each server's configured policy, and runs a tool
// loop over sampled's own tools when a server asks for one.
//
// A request goes through the checks, model choice and answer validation of
// POST /v1/messages. Tools in a request are the server's: the model's
// tool_use blocks are returned (stopReason toolUse) and the server runs its
// loop. A request carrying maxIterations and allowedToolPatterns (under
// _meta, or as members of the params where the transport keeps them) asks
// for a client-run loop instead: sampled runs it over its own tools that
// match the patterns and the server's policy, records it as a run like any
// other (GET /v1/loops/{id}) and returns the final answer.
package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// Sampler runs one model call, as POST /v1/messages does.
type Sampler interface {
	Sample(ctx context.Context, p *sampler.Params) (*sampler.Result, error)
}

// Loops runs a tool loop and waits for its end (loop.Engine.Run).
type Loops interface {
	Run(ctx context.Context, spec loop.Spec, onIteration func(int)) (*loop.Snapshot, error)
}

// ToolLister lists sampled's exposed tools.
type ToolLister interface {
	Tools() []tools.Tool
}

// defaultLoopIterations caps a client-run loop when the policy sets no cap.
const defaultLoopIterations = 10

// Policy is what one MCP server may ask of sampled as its sampling client.
// The zero value allows sampling with the default model, no cap beyond the
// service's own, no rate limit and no client-run loop.
type Policy struct {
	// Disabled refuses every request.
	Disabled bool
	// Models are the model IDs or aliases the server may use; the first is
	// used when the server's preferences select none of them. Empty means
	// the default model alone.
	Models []string
	// MaxTokens caps the maxTokens of a request (lowered to it); 0 means
	// no cap.
	MaxTokens int
	// RequestsPerMinute bounds the server's requests; 0 means no limit.
	RequestsPerMinute int
	// Loop lets the server ask for a client-run loop, over the tools
	// matching LoopTools.
	Loop      bool
	LoopTools tools.Patterns
	// LoopMaxIterations caps a loop's maxIterations; 0 means 10.
	LoopMaxIterations int
}

// Admission takes places of the service's cap on sampling requests in
// flight (access.Guard), the cap HTTP sampling shares.
type Admission interface {
	// StartSample takes a place; ok false means none is free. release
	// gives it back.
	StartSample() (release func(), ok bool, retryAfter time.Duration)
}

// Options configure a Host. Sampler, Catalog, Loops and Tools are
// required.
type Options struct {
	Sampler Sampler
	Catalog *sampler.Catalog
	Loops   Loops
	Tools   ToolLister
	// Servers are the sampling policies of the MCP servers, by name; a
	// server without one is refused.
	Servers map[string]Policy
	// InFlight caps the requests answered at once, each holding a place
	// until it ends; nil means no cap.
	InFlight Admission
	// MaxTokens caps every request's maxTokens (lowered to it), whatever
	// its policy says (SAMPLED_MAX_TOKENS); 0 means no cap.
	MaxTokens int
	// Metrics nil records nothing; Logger nil discards.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Host answers the sampling requests of MCP servers; it implements
// tools.SamplingHost. Its methods are safe for concurrent use.
type Host struct {
	o        Options
	policies map[string]*policy
}

// policy is one server's sampling policy, resolved against the catalog.
type policy struct {
	Policy
	models []string        // allowed model IDs, the server's default first
	ok     map[string]bool // the same, as a set
	limit  *rate.Limiter   // nil when unlimited
}

// New resolves each server's policy. A model the catalog does not know is
// left out (the configuration was checked when it was read).
func New(o Options) *Host {
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	h := &Host{o: o, policies: map[string]*policy{}}
	for name, s := range o.Servers {
		p := &policy{Policy: s, ok: map[string]bool{}}
		if c := o.MaxTokens; c > 0 && (p.MaxTokens == 0 || p.MaxTokens > c) {
			p.MaxTokens = c
		}
		specs := s.Models
		if len(specs) == 0 {
			specs = []string{o.Catalog.Default().ID()}
		}
		for _, spec := range specs {
			m, err := o.Catalog.Lookup(spec)
			if err != nil || p.ok[m.ID()] {
				continue
			}
			p.models = append(p.models, m.ID())
			p.ok[m.ID()] = true
		}
		if n := s.RequestsPerMinute; n > 0 {
			p.limit = rate.NewLimiter(rate.Every(time.Minute/time.Duration(n)), n)
		}
		h.policies[name] = p
		// The series exist from the start, at 0: a dashboard shows that a
		// server sent nothing, and increase() sees the first request.
		for _, outcome := range []string{outcomeOK, outcomeRefused, outcomeInvalid, outcomeError, outcomeCancelled} {
			o.Metrics.MCPSampling.WithLabelValues(name, outcome)
		}
	}
	return h
}

// Outcomes of a sampling request, the values of the outcome label.
const (
	outcomeOK        = "ok"
	outcomeRefused   = "refused"
	outcomeInvalid   = "invalid"
	outcomeError     = "error"
	outcomeCancelled = "cancelled"
)

// CreateMessage answers one sampling request of an MCP server. Errors are
// *tools.SamplingError: -1 for a refusal, -32602 for invalid params (the
// message names the JSON Pointer path), -32603 for a failed model call or
// loop.
func (h *Host) CreateMessage(ctx context.Context, req *tools.SamplingRequest) (*sampler.CreateMessageResult, error) {
	res, err := h.createMessage(ctx, req)
	outcome := outcomeOf(ctx, err)
	server := req.Server
	if _, ok := h.policies[server]; !ok {
		server = "other"
	}
	h.o.Metrics.MCPSampling.WithLabelValues(server, outcome).Inc()
	if err != nil {
		h.o.Logger.Info("mcp sampling request not answered", "mcpServer", req.Server, "depth", req.Depth, "outcome", outcome, "error", err)
	}
	return res, err
}

// outcomeOf names how a request ended: a refusal is the host's own;
// anything else is what sampler.Outcome makes of the error.
func outcomeOf(ctx context.Context, err error) string {
	var se *tools.SamplingError
	switch {
	case err == nil:
		return outcomeOK
	case errors.As(err, &se) && se.Code == tools.CodeRefused && ctx.Err() == nil:
		return outcomeRefused
	}
	switch o, _ := sampler.Outcome(ctx, nil, err); o {
	case sampler.OutcomeInvalidRequest:
		return outcomeInvalid
	case sampler.OutcomeCancelled:
		return outcomeCancelled
	}
	return outcomeError
}

func refused(format string, args ...any) error {
	return &tools.SamplingError{Code: tools.CodeRefused, Message: fmt.Sprintf(format, args...)}
}

// invalid is -32602; it wraps sampler.ErrInvalid, which makes its outcome
// invalid.
func invalid(format string, args ...any) error {
	return &tools.SamplingError{Code: tools.CodeInvalidParams, Message: fmt.Sprintf(format, args...), Err: sampler.ErrInvalid}
}

func failed(format string, args ...any) error {
	return &tools.SamplingError{Code: tools.CodeInternal, Message: fmt.Sprintf(format, args...)}
}

func (h *Host) createMessage(ctx context.Context, req *tools.SamplingRequest) (*sampler.CreateMessageResult, error) {
	pol, ok := h.policies[req.Server]
	switch {
	case !ok:
		return nil, refused("sampling is not available to MCP server %q", req.Server)
	case pol.Disabled:
		return nil, refused("sampling is disabled for MCP server %q in sampled's configuration", req.Server)
	case req.Depth > tools.MaxDepth:
		// Nested sampling: a request made by a tool that a client-run
		// loop called, itself answering a request, and so on.
		return nil, refused("nested sampling too deep: this request is at depth %d, the limit is %d (a tool called by a client-run loop asked for sampling, and so on)", req.Depth, tools.MaxDepth)
	case pol.limit != nil && !pol.limit.Allow():
		return nil, refused("rate limit: MCP server %q may send %d sampling requests per minute", req.Server, pol.RequestsPerMinute)
	}
	if h.o.InFlight != nil {
		release, ok, _ := h.o.InFlight.StartSample()
		if !ok {
			return nil, refused("sampled is serving as many sampling requests as it takes at once (limits.inFlightSamples); try again shortly")
		}
		defer release()
	}
	ext, err := extensions(req.Params.Meta)
	if err != nil {
		return nil, err
	}
	p, err := req.Params.Params()
	if err != nil {
		return nil, invalidParams(err)
	}
	p.ModelSpec = pol.model(h.o.Catalog, p.ModelPreferences)
	if limit := pol.MaxTokens; limit > 0 && p.MaxTokens > limit {
		p.MaxTokens = limit
	}
	if ext.maxIterations > 0 {
		return h.runLoop(ctx, req, pol, p, ext)
	}
	if req.Progress != nil {
		req.Progress(ctx, 0, "sampling with "+p.ModelSpec)
		p.OnRetry = func(attempt int, errs []sampler.FieldError) {
			msg := fmt.Sprintf("corrective retry: attempt %d", attempt)
			if len(errs) > 0 {
				msg += " (" + errs[0].Path + ": " + errs[0].Message + ")"
			}
			req.Progress(ctx, float64(attempt-1), msg)
		}
	}
	p.Caller = "mcp_host"
	res, err := h.o.Sampler.Sample(ctx, p)
	if err != nil {
		return nil, samplingError(ctx, err)
	}
	tools.ChargeNested(ctx, tools.Nested{Model: res.ModelID, Usage: res.Usage}) // to the loop whose tool call asked
	out := sampler.CreateMessageResultOf(res)
	return &out, nil
}

// model chooses the model of a request: the one the server's preferences
// select among all models if the policy allows it, else the policy's first.
// (MCP's preferences are advisory: a client may always choose.)
func (p *policy) model(cat *sampler.Catalog, prefs *sampler.ModelPreferences) string {
	if m, err := cat.Select("", prefs); err == nil && p.ok[m.ID()] {
		return m.ID()
	}
	return p.models[0]
}

// invalidParams converts a checking error to -32602, naming every path.
func invalidParams(err error) error {
	var inv *sampler.InvalidError
	if errors.As(err, &inv) {
		parts := make([]string, len(inv.Errors))
		for i, fe := range inv.Errors {
			parts[i] = fe.Path + ": " + fe.Message
		}
		return invalid("invalid params: %s", strings.Join(parts, "; "))
	}
	return invalid("invalid params: %v", err)
}

// samplingError converts the sampling service's error.
func samplingError(ctx context.Context, err error) error {
	var up *sampler.UpstreamError
	switch {
	case errors.Is(err, sampler.ErrInvalid):
		return invalidParams(err)
	case ctx.Err() != nil:
		return failed("cancelled")
	case errors.As(err, &up):
		return failed("the model call failed: %s", up.Error())
	default:
		return failed("the model call failed: %v", err)
	}
}
