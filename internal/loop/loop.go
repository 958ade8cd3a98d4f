// Package loop runs agentic tool loops: the model asks for tools, the tools
// run on MCP servers, their results go back to the model, until it answers
// in text or a limit is reached. Every step is appended to the run's event
// log, from which subscribers stream it.
package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
	"github.com/sampled/sampled/internal/tools"
)

// Terminal statuses of a run, and StatusRunning while it runs.
const (
	StatusRunning       = "running"
	StatusCompleted     = "completed"
	StatusMaxIterations = "max_iterations"
	StatusTimeout       = "timeout"
	StatusCancelled     = "cancelled"
	StatusFailed        = "failed"
)

// Event names of the catalogue.
const (
	EventLoopStarted    = "loop.started"
	EventModelCompleted = "model.completed"
	// EventModelDelta is a fragment of a model's answer, in a run whose
	// Spec asks for them (StreamDeltas).
	EventModelDelta         = "model.delta"
	EventToolStarted        = "tool.started"
	EventToolCompleted      = "tool.completed"
	EventToolSampling       = "tool.sampling"
	EventIterationCompleted = "iteration.completed"
	EventLoopCompleted      = "loop.completed"
)

// Sampler runs one model call, and checks a request without running it.
type Sampler interface {
	Sample(ctx context.Context, p *sampler.Params) (*sampler.Result, error)
	Check(p *sampler.Params) error
	// DefaultMaxTokens is the maxTokens of a loop that gives none.
	DefaultMaxTokens() int
}

// ToolSource lists and calls the tools a loop may use.
type ToolSource interface {
	Tools() []tools.Tool
	Call(ctx context.Context, name string, args json.RawMessage) (*tools.Result, error)
}

// Store keeps runs and their event logs, and tells a running loop when it
// is asked to cancel (see runs.Store).
type Store interface {
	Create(ctx context.Context, id string, snapshot json.RawMessage) error
	SetSnapshot(ctx context.Context, id string, snapshot json.RawMessage) error
	Append(ctx context.Context, id, name string, data json.RawMessage) (runs.Event, error)
	Finish(ctx context.Context, id, name string, data, snapshot json.RawMessage) (runs.Event, error)
	Cancelled(ctx context.Context, id string) (<-chan struct{}, error)
}

// Options configure an Engine. Zero values mean the documented defaults.
type Options struct {
	Sampler Sampler
	Tools   ToolSource
	Store   Store
	// Access admits the loops of Spec.Caller against that caller's
	// concurrent loops; nil admits every loop.
	Access *access.Guard
	// Metrics nil records nothing; Logger nil discards.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// MaxIterations default 10; ToolTimeout default 30 s; Parallel
	// (concurrent tool calls of one iteration) default 4.
	MaxIterations int
	ToolTimeout   time.Duration
	Parallel      int
	// MaxToolResultBytes caps each tool result the model sees: a longer
	// one is cut, with a note saying so; 0 means 1 MiB.
	MaxToolResultBytes int
	// MaxRunBytes caps a run's event log and its transcript, each: a run
	// that would grow past it ends failed; 0 means 16 MiB.
	MaxRunBytes int
}

// defaultTimeout bounds a loop whose Spec gives no timeout.
const defaultTimeout = 300 * time.Second

// Origin kinds: who started a run.
const (
	// OriginHTTP: POST /v1/loops.
	OriginHTTP = "http"
	// OriginMCP: an MCP server's sampling request asking for a client-run
	// loop.
	OriginMCP = "mcp"
)

// Origin says who started a run. The zero value means OriginHTTP.
type Origin struct {
	// Kind is OriginHTTP or OriginMCP.
	Kind string `json:"kind"`
	// Server is the configured name of the MCP server that asked for the
	// run (kind mcp).
	Server string `json:"server,omitempty"`
	// RequestID is the JSON-RPC id of that server's sampling request, as
	// text (kind mcp).
	RequestID string `json:"requestId,omitempty"`
	// Depth is how deeply the run is nested in other runs: 0 for none, n
	// for a loop a tools/call of depth n started (tools.MetaDepth), or a
	// sampling request of depth n asked for.
	Depth int `json:"depth,omitempty"`
}

// Spec is what a client asks a loop to do.
type Spec struct {
	// Origin says who asks; its zero value means POST /v1/loops.
	Origin Origin
	// Owner is the name of the API key that started the run (never the
	// key itself); "" when the service has no keys. Only its owner may
	// read, follow or cancel the run.
	Owner string
	// Caller, if set, is who starts the run: the run belongs to its key
	// (Owner is its name) and counts against its concurrent loops
	// (Options.Access) until it has recorded its terminal event. At its
	// limit Start returns an *access.LimitError (LimitLoops).
	Caller           *access.Caller
	Messages         []sampler.Message
	SystemPrompt     string
	ModelSpec        string
	ModelPreferences *sampler.ModelPreferences
	// AllowedTools are glob patterns (path.Match) over exposed tool names;
	// empty allows every tool.
	AllowedTools []string
	ToolChoice   *sampler.ToolChoice
	// MaxIterations (1 to 100), Timeout (1 ms to 1 h) and MaxTokens (> 0)
	// nil mean the engine's defaults (Options; the Sampler's maxTokens).
	MaxIterations *int
	Timeout       *time.Duration
	MaxTokens     *int
	Temperature   *float64
	// StreamDeltas records each fragment of the model's answers as a
	// model.delta event, kept in the log like the others.
	StreamDeltas bool
}

// limits are a run's limits, its Spec's or the engine's defaults.
type limits struct {
	maxIterations int
	timeout       time.Duration
	maxTokens     int
}

// Snapshot is the state of a run, as GET /v1/loops/{id} returns it. Its
// summary (Summary) leaves out the transcript.
type Snapshot struct {
	ID            string            `json:"id"`
	TraceID       string            `json:"traceId"`
	Origin        Origin            `json:"origin"`
	Owner         string            `json:"owner,omitempty"`
	Status        string            `json:"status"`
	Model         string            `json:"model,omitempty"`
	Tools         []string          `json:"tools"`
	MaxIterations int               `json:"maxIterations"`
	TimeoutMs     int64             `json:"timeoutMs"`
	Iterations    int               `json:"iterations"`
	Messages      []sampler.Message `json:"messages"`
	Result        string            `json:"result,omitempty"`
	Error         string            `json:"error,omitempty"`
	Usage         sampler.Usage     `json:"usage"`
	CreatedAt     time.Time         `json:"createdAt"`
	FinishedAt    *time.Time        `json:"finishedAt,omitempty"`
}

// Engine runs loops. A loop stops when it is cancelled through the Store
// (runs.Store.Cancel, from this process or another sharing the store), when
// the Engine closes, or by its own limits.
type Engine struct {
	o       Options
	mu      sync.Mutex      // orders Start's wg.Add before Close's wg.Wait
	closing context.Context // ended by Close
	close   context.CancelFunc
	wg      sync.WaitGroup
}

// New returns an Engine.
func New(o Options) *Engine {
	if o.MaxIterations <= 0 {
		o.MaxIterations = 10
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = 30 * time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.MaxToolResultBytes <= 0 {
		o.MaxToolResultBytes = 1 << 20
	}
	if o.MaxRunBytes <= 0 {
		o.MaxRunBytes = 16 << 20
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	// The series exist from the start, at 0: an idle service's dashboard
	// shows zeros, and increase() sees the first loop.
	for _, status := range []string{StatusCompleted, StatusMaxIterations, StatusTimeout, StatusCancelled, StatusFailed} {
		o.Metrics.LoopsTotal.WithLabelValues(status)
	}
	for _, event := range []string{EventLoopStarted, EventModelDelta, EventModelCompleted, EventToolStarted, EventToolCompleted, EventToolSampling, EventIterationCompleted, EventLoopCompleted} {
		o.Metrics.SSEEvents.WithLabelValues(event)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{o: o}
	e.closing, e.close = context.WithCancel(context.Background())
	return e
}

var (
	// ErrClosed is the error of Start after Close.
	ErrClosed = errors.New("loop: engine closed")
	// errCancelled is the cause of a loop cancelled through the store or
	// by Close.
	errCancelled = errors.New("loop cancelled")
	// errStore is the cause of a loop stopped because the store did not
	// record one of its events.
	errStore = errors.New("the run store failed")
	// errTooLarge is the cause of a loop stopped because its event log or
	// transcript would grow past Options.MaxRunBytes.
	errTooLarge = errors.New("run too large")
)

// Start checks spec, creates the run and runs the loop in the background.
// The loop ends when ctx ends, when it is cancelled through the store, on
// Close, or by its own limits.
func (e *Engine) Start(ctx context.Context, spec Spec) (string, error) {
	r, _, err := e.start(ctx, spec, nil)
	if err != nil {
		return "", err
	}
	return r.id, nil
}

// Run starts a loop as Start does and waits for its end: it returns the
// final snapshot (Status says how it ended). Ending ctx cancels the loop,
// and Run still returns the cancelled run's snapshot. onIteration, if not
// nil, is called after each iteration with its number, from the loop's
// goroutine. An error means the loop did not start (an invalid spec is a
// *sampler.InvalidError, a closed engine ErrClosed).
func (e *Engine) Run(ctx context.Context, spec Spec, onIteration func(int)) (*Snapshot, error) {
	r, done, err := e.start(ctx, spec, onIteration)
	if err != nil {
		return nil, err
	}
	<-done
	snap := *r.snap
	return &snap, nil
}

// start starts a run as Start does; done is closed once the run has
// recorded its end, after which r.snap is its final state. onIteration,
// if not nil, is called from the run's goroutine after each iteration.
func (e *Engine) start(ctx context.Context, spec Spec, onIteration func(int)) (r *run, done <-chan struct{}, err error) {
	lim, err := e.check(&spec)
	if err != nil {
		return nil, nil, err
	}
	defs, names := []sampler.Tool(nil), []string{}
	for _, t := range e.o.Tools.Tools() {
		if allowed(spec.AllowedTools, t.Name) {
			defs = append(defs, sampler.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
			names = append(names, t.Name)
		}
	}
	if tc := spec.ToolChoice; tc != nil && tc.Mode == sampler.ToolChoiceTool && !slices.Contains(names, tc.Name) {
		return nil, nil, sampler.InvalidAll([]sampler.FieldError{{Path: "/toolChoice/name",
			Message: fmt.Sprintf("toolChoice names tool %q, which is not among the tools this loop may use", tc.Name)}})
	}
	e.mu.Lock()
	if e.closing.Err() != nil {
		e.mu.Unlock()
		return nil, nil, ErrClosed
	}
	e.wg.Add(1)
	e.mu.Unlock()
	release, err := e.admit(ctx, &spec)
	if err != nil {
		e.wg.Done()
		return nil, nil, err
	}
	id := newID("loop_")
	// The run's trace is its request's: the caller's (traceparent), or
	// the one sampled's own span began. Without one it gets an id of the
	// same form, so that its events and logs can still be joined.
	trace := telemetry.TraceID(ctx)
	if trace == "" {
		trace = newTraceID()
	}
	if spec.Origin.Kind == "" {
		spec.Origin.Kind = OriginHTTP
	}
	snap := &Snapshot{ID: id, TraceID: trace, Origin: spec.Origin, Owner: spec.Owner, Status: StatusRunning, Tools: names, MaxIterations: lim.maxIterations,
		TimeoutMs: lim.timeout.Milliseconds(), Messages: spec.Messages, CreatedAt: time.Now().UTC()}
	b, err := json.Marshal(snap)
	if err == nil && len(b) > e.o.MaxRunBytes {
		err = sampler.Invalid("/messages", "the conversation takes %d bytes, more than a run may hold (%d)", len(b), e.o.MaxRunBytes)
	}
	if err == nil {
		err = e.o.Store.Create(ctx, id, b)
	}
	if err != nil {
		release()
		e.wg.Done()
		return nil, nil, fmt.Errorf("loop: create run: %w", err)
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopCtx := context.AfterFunc(ctx, func() { cancel(errCancelled) })
	stopClosing := context.AfterFunc(e.closing, func() { cancel(errCancelled) })
	// The loops its tools start through sampled's /mcp count as its key's.
	unvouch := func() {}
	if spec.Caller != nil && e.o.Access != nil {
		var token string
		token, unvouch = e.o.Access.Vouch(spec.Caller)
		lctx = tools.WithCallerToken(lctx, token)
	}
	e.o.Metrics.LoopsActive.Inc()
	r = &run{e: e, stop: cancel, id: id, spec: spec, lim: lim, defs: defs, snap: snap, log: e.o.Logger.With("loopId", id, "traceId", trace),
		onIteration: onIteration, saved: len(spec.Messages)}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer e.wg.Done()
		defer release()
		defer unvouch()
		defer e.o.Metrics.LoopsActive.Dec()
		defer stopClosing()
		defer stopCtx()
		defer cancel(nil)
		r.run(lctx)
	}()
	return r, finished, nil
}

// admit counts the loop of spec.Caller, if any, against its concurrent
// loops and names it the run's owner; release ends the count.
func (e *Engine) admit(ctx context.Context, spec *Spec) (release func(), err error) {
	c := spec.Caller
	if c == nil || e.o.Access == nil {
		return func() {}, nil
	}
	release, ok, wait := e.o.Access.StartLoop(ctx, c)
	if !ok {
		e.o.Metrics.RateLimited.WithLabelValues(metrics.KeyLabel(c.Name()), metrics.LimitLoops).Inc()
		return nil, &access.LimitError{Limit: access.LimitLoops, RetryAfter: wait, Detail: fmt.Sprintf(
			"this API key has as many loops running as it may (its loop limit is reached); retry after %ds", access.RetrySeconds(wait))}
	}
	spec.Owner = c.Name()
	return release, nil
}

// Close cancels every running loop and waits for them to finish: each
// records its terminal event (status cancelled) in the store. Start then
// gives ErrClosed. It is safe to call more than once and concurrently.
func (e *Engine) Close() {
	e.mu.Lock()
	e.close()
	e.mu.Unlock()
	e.wg.Wait()
}

// check validates a spec and returns its limits; it owns the rules of a
// loop's limits.
func (e *Engine) check(s *Spec) (limits, error) {
	var errs []sampler.FieldError
	if len(s.Messages) == 0 {
		errs = append(errs, sampler.FieldError{Path: "/messages", Message: "give prompt or messages"})
	}
	lim := limits{maxIterations: e.o.MaxIterations, timeout: defaultTimeout, maxTokens: e.o.Sampler.DefaultMaxTokens()}
	if s.MaxIterations != nil {
		if lim.maxIterations = *s.MaxIterations; lim.maxIterations < 1 || lim.maxIterations > 100 {
			errs = append(errs, sampler.FieldError{Path: "/maxIterations", Message: "maxIterations must be between 1 and 100"})
		}
	}
	if s.Timeout != nil {
		if lim.timeout = *s.Timeout; lim.timeout < time.Millisecond || lim.timeout > time.Hour {
			errs = append(errs, sampler.FieldError{Path: "/timeoutMs", Message: "timeoutMs must be between 1 and 3600000"})
		}
	}
	if s.MaxTokens != nil {
		if lim.maxTokens = *s.MaxTokens; lim.maxTokens < 1 {
			errs = append(errs, sampler.FieldError{Path: "/maxTokens", Message: "maxTokens must be greater than 0"})
		}
	}
	for i, p := range s.AllowedTools {
		if !tools.Pattern(p).Valid() {
			errs = append(errs, sampler.FieldError{Path: fmt.Sprintf("/allowedTools/%d", i), Message: "not a valid glob pattern"})
		}
	}
	if len(errs) == 0 && len(s.Messages) > 0 {
		// The first model call must be acceptable: known model, valid
		// messages, maxTokens and temperature.
		err := e.o.Sampler.Check(&sampler.Params{
			Request:   sampler.Request{Messages: s.Messages, SystemPrompt: s.SystemPrompt, MaxTokens: lim.maxTokens, Temperature: s.Temperature},
			ModelSpec: s.ModelSpec, ModelPreferences: s.ModelPreferences,
		})
		var inv *sampler.InvalidError
		if errors.As(err, &inv) {
			errs = append(errs, inv.Errors...)
		} else if err != nil {
			return lim, err
		}
	}
	return lim, sampler.InvalidAll(errs)
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// newTraceID returns a random trace id in W3C form (32 hex digits).
func newTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// allowed reports whether name matches one of the patterns (all when none).
func allowed(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if tools.Pattern(p).Match(name) {
			return true
		}
	}
	return false
}
