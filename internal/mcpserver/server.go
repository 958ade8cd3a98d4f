// Package mcpserver is sampled as an MCP server: a go-sdk mcp.Server over
// streamable HTTP, mounted at /mcp, offering the agent tools (agent_decide,
// agent_analyze, agent_extract, agent_classify, agent_summarize,
// agent_generate, agent_compare and agent_delegate, and sample, MCP's
// sampling/createMessage as a tool). Each tool is one
// sampling request — a tool loop for agent_delegate — run by the connected
// client through sampling/createMessage when it can sample, or by sampled's
// own providers and loop engine otherwise (Mode). Answers with a shape go
// through the guaranteed path: they are validated and corrected, and a
// request that runs out of attempts is a tool result with isError set.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/sampler"
)

// Mode picks who samples for the tools.
type Mode string

// Modes; the configuration checks the switch (config.MCPEndpoint).
const (
	// ModeAuto: the client when it declared the sampling capability (with
	// tools, for agent_delegate), else sampled.
	ModeAuto Mode = "auto"
	// ModeClient: always the client; a client that cannot sample gets a
	// tool error.
	ModeClient Mode = "client"
	// ModeService: always sampled's own providers and loop engine.
	ModeService Mode = "service"
)

// Who answered a tool call: the metrics' sampler label.
const (
	byClient  = "client"
	byService = "service"
)

// Loops starts tool loops (loop.Engine).
type Loops interface {
	Start(ctx context.Context, spec loop.Spec) (string, error)
}

// Runs lets agent_delegate follow the events of its loop (runs.Store).
type Runs interface {
	Subscribe(ctx context.Context, id string, after int64) (runs.Subscription, error)
}

// Options configure the server. Zero values mean the documented defaults.
type Options struct {
	// Sampling are the options of sampled's own sampling service, built
	// once; a second service made from them samples through the client.
	// Providers and Catalog are required.
	Sampling sampler.Options
	// Loops and Runs serve agent_delegate when sampled runs the loop.
	Loops Loops
	Runs  Runs
	// Access finds the caller of a tools/call request from its
	// Authorization header: the loops agent_delegate starts belong to it,
	// as POST /v1/loops's do. Nil starts them without an owner.
	Access *access.Guard
	// Mode nil means ModeAuto.
	Mode Mode
	// AllowedOrigins are the browser origins, besides loopback ones, that
	// may call /mcp (scheme://host[:port]).
	AllowedOrigins []string
	// Metrics nil records nothing; Logger nil discards.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Version is the server's version in the initialize result.
	Version string
	// SessionTimeout closes sessions idle that long; 0 means 30 minutes.
	SessionTimeout time.Duration
}

// Server is sampled's MCP server. Its Handler serves /mcp.
type Server struct {
	o       Options
	mcp     *mcp.Server
	handler http.Handler
	origins map[string]bool
	log     *slog.Logger
	metrics *metrics.Metrics
	service *sampler.Service // sampled's own providers
	client  *sampler.Service // the session's client (clientProvider)
}

// New builds the MCP server and its tools.
func New(o Options) (*Server, error) {
	if o.Sampling.Schemas == nil {
		o.Sampling.Schemas = sampler.NewSchemaCache(0)
	}
	if o.Mode == "" {
		o.Mode = ModeAuto
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	service, err := sampler.New(o.Sampling)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	co := o.Sampling
	co.Providers = []sampler.Provider{clientProvider{}}
	co.Catalog = sampler.NewCatalog([]sampler.Model{{Provider: clientName, Name: clientModel}}, "")
	// The client's answers are not retried as upstream failures: a refusal
	// is the user's.
	co.Upstream.MaxAttempts = 1
	client, err := sampler.New(co)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s := &Server{o: o, origins: map[string]bool{}, log: o.Logger.With("component", "mcpserver"), metrics: o.Metrics,
		service: service, client: client}
	for _, origin := range o.AllowedOrigins {
		s.origins[normalOrigin(origin)] = true
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "sampled", Title: "sampled agent tools", Version: o.Version}, &mcp.ServerOptions{
		Logger: s.log,
		Instructions: "Agent tools backed by LLM sampling. Each tool asks a model once (agent_delegate runs a tool loop); " +
			"answers with a shape are validated against the tool's output schema and corrected before they are returned.",
	})
	s.mcp.AddReceivingMiddleware(s.record)
	s.addTools()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Logger:         s.log,
		EventStore:     mcp.NewMemoryEventStore(nil),
		SessionTimeout: o.SessionTimeout,
	})
	s.handler = s.checkOrigin(h)
	return s, nil
}

// Handler serves the streamable HTTP transport at /mcp.
func (s *Server) Handler() http.Handler { return s.handler }

// checkOrigin refuses requests whose Origin header names a site that is
// neither loopback nor allowed: a web page cannot reach a local sampled
// through DNS rebinding or a browser's cross-site request. The go-sdk
// handler checks the Host header of requests to a loopback address too.
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
			s.log.Warn("origin refused", "origin", origin)
			http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	if host := u.Hostname(); host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	} else if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return s.origins[normalOrigin(origin)]
}

// normalOrigin lowercases an origin and drops a trailing slash.
func normalOrigin(o string) string { return strings.TrimSuffix(strings.ToLower(o), "/") }

// toolError is a tool result with isError set: the text says what went
// wrong, outcome is the metrics label.
type toolError struct {
	outcome string
	text    string
}

func (e *toolError) Error() string { return e.text }

// Outcomes of tool calls (the metrics' outcome label).
const (
	outcomeOK          = "ok"
	outcomeInvalidArgs = "invalid_arguments"
	outcomeRefused     = "refused"
	outcomeFailed      = "failed"
	outcomeCancelled   = "cancelled"
)

// call is one tool call in progress, as record reports it.
type call struct {
	req      *mcp.CallToolRequest // nil until the tool's handler runs
	by       string               // byClient, byService or "none"
	outcome  string
	progress *progress
}

type callKey struct{}

// record is a receiving middleware that records every tools/call: its
// duration, who sampled and its outcome, in metrics and the log. A call the
// SDK refuses before its handler runs has invalid arguments; one of a tool
// this server does not have is not recorded.
func (s *Server) record(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		r, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return next(ctx, method, req)
		}
		start := time.Now()
		c := &call{by: "none", outcome: outcomeInvalidArgs}
		res, err := next(context.WithValue(ctx, callKey{}, c), method, req)
		if err != nil && c.req == nil {
			return res, err
		}
		tool := r.Params.Name
		s.metrics.MCPToolCalls.WithLabelValues(tool, c.by, c.outcome).Inc()
		s.metrics.MCPToolDuration.WithLabelValues(tool, c.by).Observe(time.Since(start).Seconds())
		s.log.LogAttrs(ctx, slog.LevelInfo, "tool call", slog.String("tool", tool), slog.String("session", r.Session.ID()),
			slog.String("sampler", c.by), slog.String("outcome", c.outcome), slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000))
		return res, err
	}
}

// add registers a tool with go-sdk, which checks its arguments against the
// input schema and its result against the output schema. run answers a
// call in the mode who picks; needsTools: client sampling must support
// tools (agent_delegate).
func add[In, Out any](s *Server, t *mcp.Tool, needsTools bool, run func(ctx context.Context, c *call, in In) (Out, error)) {
	mcp.AddTool(s.mcp, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		c, ok := ctx.Value(callKey{}).(*call)
		if !ok {
			c = &call{}
		}
		c.req, c.progress = req, newProgress(ctx, req)
		var out Out
		by, err := s.who(req.Session, needsTools)
		if err == nil {
			c.by = by
			out, err = run(ctx, c, in)
		}
		c.outcome, err = failure(ctx, err)
		return nil, out, err
	})
}

// who decides who samples for a call in session ss.
func (s *Server) who(ss *mcp.ServerSession, needsTools bool) (string, error) {
	if s.o.Mode == ModeService {
		return byService, nil
	}
	can, why := clientCanSample(ss, needsTools)
	switch {
	case can:
		return byClient, nil
	case s.o.Mode == ModeClient:
		return "", &toolError{outcome: outcomeRefused, text: "this server samples through its client (mcpServer.sampling: client), but " + why}
	}
	return byService, nil
}

// failure says how a call that returned err ended (its outcome label) and
// what its result, with isError set, says. Errors other than toolErrors
// are sampling's, which sampler.Outcome classifies.
func failure(ctx context.Context, err error) (string, error) {
	var te *toolError
	switch {
	case err == nil:
		return outcomeOK, nil
	case ctx.Err() != nil:
		return outcomeCancelled, ctx.Err()
	case errors.As(err, &te):
		return te.outcome, err
	}
	outcome, _ := sampler.Outcome(ctx, nil, err)
	switch outcome {
	case sampler.OutcomeInvalidRequest:
		return outcomeInvalidArgs, errors.New("invalid request: " + err.Error())
	case sampler.OutcomeExhausted:
		var ex *sampler.ExhaustedError
		errors.As(err, &ex)
		text := fmt.Sprintf("no valid answer after %d attempts; the last answer's errors:%s", ex.Attempts, listErrors(ex.Errors))
		if ex.LastResult != nil && ex.LastResult.Text != "" {
			text += "\nthe last answer: " + clip(ex.LastResult.Text, 2000)
		}
		return outcome, errors.New(text)
	}
	return outcome, errors.New("the model call failed: " + err.Error())
}

// listErrors renders field errors one per line.
func listErrors(errs []sampler.FieldError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n- %s: %s", e.Path, e.Message)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Close ends every MCP session, and with them their open streams, so that
// an http.Server's Shutdown does not wait for them.
func (s *Server) Close() {
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
}
