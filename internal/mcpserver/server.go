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
	"encoding/json"
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
	// Sampling are the options of sampled's own sampling service; each
	// tool call runs a Service made from them, whose observer also reports
	// corrective retries as progress. Providers and Catalog are required.
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
	client  *sampler.Catalog // the one model of client sampling
}

// New builds the MCP server and its tools.
func New(o Options) (*Server, error) {
	if len(o.Sampling.Providers) == 0 || o.Sampling.Catalog == nil {
		return nil, errors.New("mcpserver: no sampling providers")
	}
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
	s := &Server{o: o, origins: map[string]bool{}, log: o.Logger.With("component", "mcpserver"), metrics: o.Metrics,
		client: sampler.NewCatalog([]sampler.Model{{Provider: clientProvider, Name: clientModel}}, "")}
	for _, origin := range o.AllowedOrigins {
		s.origins[normalOrigin(origin)] = true
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "sampled", Title: "sampled agent tools", Version: o.Version}, &mcp.ServerOptions{
		Logger: s.log,
		Instructions: "Agent tools backed by LLM sampling. Each tool asks a model once (agent_delegate runs a tool loop); " +
			"answers with a shape are validated against the tool's output schema and corrected before they are returned.",
	})
	for _, t := range s.tools() {
		s.add(t)
	}
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

// tool is one agent tool: its definition and handler. The handler returns
// the structured result, or a *toolError for a result with isError set.
type tool struct {
	def *mcp.Tool
	// needsTools: client sampling must support tools (agent_delegate).
	needsTools bool
	run        func(ctx context.Context, c *call) (any, error)
}

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
	outcomeExhausted   = "exhausted"
	outcomeRefused     = "refused"
	outcomeUpstream    = "upstream_error"
	outcomeFailed      = "failed"
	outcomeCancelled   = "cancelled"
)

// call is one tool call in progress.
type call struct {
	s        *Server
	req      *mcp.CallToolRequest
	by       string // byClient or byService
	progress *progress
}

// add registers t with a handler that validates the arguments, picks who
// samples, runs the tool and records the call.
func (s *Server) add(t tool) {
	input, err := s.o.Sampling.Schemas.Compile(t.def.InputSchema.(json.RawMessage), "/inputSchema")
	if err != nil {
		panic(fmt.Sprintf("mcpserver: tool %s: %v", t.def.Name, err)) // the tool table is code
	}
	s.mcp.AddTool(t.def, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		c := &call{s: s, req: req, progress: newProgress(ctx, req)}
		out, err := s.handle(ctx, t, c, input)
		outcome := outcomeOK
		var te *toolError
		switch {
		case ctx.Err() != nil && err != nil:
			outcome = outcomeCancelled
		case errors.As(err, &te):
			outcome = te.outcome
		case err != nil:
			outcome = outcomeFailed
		}
		by := c.by
		if by == "" {
			by = "none"
		}
		s.metrics.MCPToolCalls.WithLabelValues(t.def.Name, by, outcome).Inc()
		s.metrics.MCPToolDuration.WithLabelValues(t.def.Name, by).Observe(time.Since(start).Seconds())
		s.log.LogAttrs(ctx, slog.LevelInfo, "tool call", slog.String("tool", t.def.Name), slog.String("session", req.Session.ID()),
			slog.String("sampler", by), slog.String("outcome", outcome), slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000))
		switch {
		case outcome == outcomeCancelled:
			// A cancelled request gets no answer; go-sdk sends none.
			return nil, ctx.Err()
		case te != nil:
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: te.text}}}, nil
		case err != nil:
			s.log.Error("tool failed", "tool", t.def.Name, "error", err)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the tool failed: " + err.Error()}}}, nil
		}
		text, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(text), Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
	})
}

func (s *Server) handle(ctx context.Context, t tool, c *call, input *sampler.Schema) (any, error) {
	args := c.req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if errs := input.Validate(args); errs != nil {
		return nil, &toolError{outcome: outcomeInvalidArgs, text: "invalid arguments:" + listErrors(errs)}
	}
	c.req.Params.Arguments = args
	by, err := s.who(c.req.Session, t.needsTools)
	if err != nil {
		return nil, err
	}
	c.by = by
	return t.run(ctx, c)
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

// sampler returns the sampling service of the call: the client's or
// sampled's, observed for progress. meta is the _meta of the client's
// sampling requests.
func (c *call) sampler(meta map[string]any) (*sampler.Service, error) {
	o := c.s.o.Sampling
	o.Observer = observer{base: o.Observer, progress: c.progress}
	if c.by == byClient {
		o.Providers = []sampler.Provider{&client{session: c.req.Session, meta: meta}}
		o.Catalog = c.s.client
		// The client's answers are not retried as upstream failures: a
		// refusal is the user's.
		o.Upstream.MaxAttempts = 1
	}
	return sampler.New(o)
}

// listErrors renders field errors one per line.
func listErrors(errs []sampler.FieldError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n- %s: %s", e.Path, e.Message)
	}
	return b.String()
}

// sampleError turns an error of a sampling request into a tool error, or
// returns it when the call was cancelled.
func sampleError(ctx context.Context, err error) error {
	var (
		ex  *sampler.ExhaustedError
		inv *sampler.InvalidError
		up  *sampler.UpstreamError
	)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &ex):
		text := fmt.Sprintf("no valid answer after %d attempts; the last answer's errors:%s", ex.Attempts, listErrors(ex.Errors))
		if ex.LastResult != nil && ex.LastResult.Text != "" {
			text += "\nthe last answer: " + clip(ex.LastResult.Text, 2000)
		}
		return &toolError{outcome: outcomeExhausted, text: text}
	case errors.As(err, &inv):
		return &toolError{outcome: outcomeInvalidArgs, text: "invalid request:" + listErrors(inv.Errors)}
	case errors.As(err, &up):
		return &toolError{outcome: outcomeUpstream, text: "the model call failed: " + up.Error()}
	}
	return err
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
