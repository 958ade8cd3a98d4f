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
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
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

// Loops runs tool loops (loop.Engine).
type Loops interface {
	Run(ctx context.Context, spec loop.Spec, onIteration func(int)) (*loop.Snapshot, error)
}

// Options configure the server.
type Options struct {
	// Service is sampled's own sampling service, the process's one.
	Service *sampler.Service
	// Client are the options of the service that samples through the
	// session's client; New sets its provider and catalog.
	Client sampler.Options
	// Loops serves agent_delegate when sampled runs the loop.
	Loops Loops
	// Access finds the caller of a request from its Authorization
	// header: a session belongs to the key that opened it, and the loops
	// agent_delegate starts belong to the key of the call, or to the one
	// its _meta's tools.MetaCaller token stands for, as POST /v1/loops's
	// do. Nil binds no session and starts loops without an owner.
	Access *access.Guard
	// Mode "" means ModeAuto.
	Mode Mode
	// AllowedOrigins are the browser origins, besides loopback ones, that
	// may call /mcp (scheme://host[:port]).
	AllowedOrigins []string
	Metrics        *metrics.Metrics
	Logger         *slog.Logger
}

// sessionTimeout closes sessions idle that long.
const sessionTimeout = 30 * time.Minute

// Server is sampled's MCP server. Its Handler serves /mcp.
type Server struct {
	o       Options
	mcp     *mcp.Server
	handler http.Handler
	origins map[string]bool
	log     *slog.Logger
	client  *sampler.Service // the session's client (clientProvider)
	owners  sync.Map         // session id → the name of the key that opened it
}

// New builds the MCP server and its tools.
func New(o Options) (*Server, error) {
	co := o.Client
	co.Providers = []sampler.Provider{clientProvider{}}
	co.Catalog = sampler.NewCatalog([]sampler.Model{{Provider: clientName, Name: clientModel}}, "")
	// The client's answers are not retried as upstream failures: a refusal
	// is the user's.
	co.Upstream.MaxAttempts = 1
	client, err := sampler.New(co)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s := &Server{o: o, origins: map[string]bool{}, log: o.Logger.With("component", "mcpserver"), client: client}
	for _, origin := range o.AllowedOrigins {
		s.origins[normalOrigin(origin)] = true
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "sampled", Title: "sampled agent tools", Version: "dev"}, &mcp.ServerOptions{
		Logger: s.log,
		Instructions: "Agent tools backed by LLM sampling. Each tool asks a model once (agent_delegate runs a tool loop); " +
			"answers with a shape are validated against the tool's output schema and corrected before they are returned.",
	})
	s.mcp.AddReceivingMiddleware(s.bind, s.record)
	s.addDecide()
	s.addAnalyze()
	s.addExtract()
	s.addClassify()
	s.addSummarize()
	s.addGenerate()
	s.addCompare()
	s.addDelegate()
	s.addSample()
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Logger:         s.log,
		EventStore:     newEventStore(),
		SessionTimeout: sessionTimeout,
	})
	return s, nil
}

func (s *Server) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || ip != nil && ip.IsLoopback() || s.origins[normalOrigin(origin)]
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

// call is one tool call in progress, as record reports it. The context of
// its handler carries it (callKey).
type call struct {
	req     *mcp.CallToolRequest // nil until the tool's handler runs
	ctx     context.Context      // the handler's
	by      string               // byClient, byService or "none"
	svc     *sampler.Service     // who samples: the client's or sampled's
	outcome string
	// meta is the _meta of the call's sampling requests to the client
	// (agent_delegate's hints).
	meta  map[string]any
	steps float64 // progress notifications sent
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
		ctx, span := toolCallSpan(telemetry.ExtractMeta(ctx, r.Params.Meta), r.Params.Name)
		defer func() { endToolCallSpan(span, c) }()
		res, err := next(context.WithValue(ctx, callKey{}, c), method, req)
		if err != nil && c.req == nil {
			return res, err
		}
		tool := r.Params.Name
		s.o.Metrics.MCPToolCalls.WithLabelValues(tool, c.by, c.outcome).Inc()
		s.o.Metrics.MCPToolDuration.WithLabelValues(tool, c.by).Observe(time.Since(start).Seconds())
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
	// The tool's series exist from the start, at 0.
	for _, by := range []string{byClient, byService} {
		s.o.Metrics.MCPToolDuration.WithLabelValues(t.Name, by)
		for _, outcome := range []string{outcomeOK, outcomeInvalidArgs, outcomeRefused, outcomeFailed, outcomeCancelled} {
			s.o.Metrics.MCPToolCalls.WithLabelValues(t.Name, by, outcome)
		}
	}
	mcp.AddTool(s.mcp, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		c := ctx.Value(callKey{}).(*call) // set by record
		c.req, c.ctx = req, ctx
		var out Out
		by, err := s.who(req.Session, needsTools)
		if err == nil {
			c.by, c.svc = by, s.o.Service
			if by == byClient {
				c.svc = s.client
			}
			out, err = run(ctx, c, in)
		}
		c.outcome, err = failure(ctx, err)
		return nil, out, err
	})
}

// step reports one more step of the call done, of total (0: unknown), as
// notifications/progress; without a progressToken it sends nothing.
func (c *call) step(total float64, format string, args ...any) {
	token := c.req.Params.GetProgressToken()
	if token == nil {
		return
	}
	if c.ctx.Err() != nil {
		return
	}
	c.steps++
	// A client that reads nothing must not hold up the call.
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	_ = c.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: c.steps, Total: total,
		Message: fmt.Sprintf(format, args...)})
}

// retry reports a corrective retry (sampler.Params.OnRetry).
func (c *call) retry(attempt int, errs []sampler.FieldError) {
	why := ""
	if len(errs) > 0 {
		why = " (" + errs[0].Path + ": " + errs[0].Message + ")"
	}
	c.step(0, "attempt %d: the answer failed validation%s; asking again with the errors", attempt, why)
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
		text := fmt.Sprintf("no valid answer after %d attempts; the last answer's errors:", ex.Attempts)
		for _, e := range ex.Errors {
			text += fmt.Sprintf("\n- %s: %s", e.Path, e.Message)
		}
		if ex.LastResult != nil && ex.LastResult.Text != "" {
			text += "\nthe last answer: " + clip(ex.LastResult.Text, 2000)
		}
		return outcome, errors.New(text)
	}
	return outcome, errors.New("the model call failed: " + err.Error())
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
