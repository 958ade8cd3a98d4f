package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
)

const (
	defaultMinBackoff = 500 * time.Millisecond
	defaultMaxBackoff = 30 * time.Second
	// connectTimeout bounds one connection attempt: start (or dial),
	// initialize and the first tools/list.
	connectTimeout = 30 * time.Second
	// listTimeout bounds a refresh of a connected server's tool list.
	listTimeout = 30 * time.Second
	// pingTimeout bounds the ping that checks a server after a call failed
	// in its transport.
	pingTimeout = 10 * time.Second
	// keepAlive is the ping interval of HTTP sessions, so that a server
	// that went away is noticed even when no call is made.
	keepAlive = 30 * time.Second
)

// clientVersion is the version sampled reports to MCP servers.
const clientVersion = "dev"

// errClosed is the state of every server once the registry is closed.
var errClosed = errors.New("registry closed")

// Registry connects to the configured MCP servers and the built-in std
// server, lists their tools, keeps the list fresh, and calls tools. Create
// it with [New] and connect it with [Registry.Start]; its methods are safe
// for concurrent use. A server that
// fails to connect or dies is retried with backoff until [Registry.Close];
// meanwhile its tools stay listed and calls to them fail with
// [ErrUnavailable].
type Registry struct {
	logger  *slog.Logger
	backoff retry.Upstream
	// servers is fixed by New; the mutable fields of each are guarded by
	// mu (client is set by Start, before any goroutine).
	servers map[string]*server
	life    context.Context // the registry's, ended by Close: it cancels calls in flight
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	metrics *metrics.Metrics

	mu      sync.Mutex
	started bool
	closed  bool
	tools   []Tool // sorted by Name
	index   map[string]toolRef
	errs    []error // errors of closing sessions in Close
}

// server is one MCP server and its connection state.
type server struct {
	name      string
	transport string
	logger    *slog.Logger
	client    *mcp.Client // set by Start
	dial      dialer
	version   string        // the protocol version offered
	keepAlive time.Duration // of HTTP sessions that go-sdk pings
	refresh   chan struct{} // one pending re-list of tools
	check     chan struct{} // one pending liveness check
	required  bool          // readiness needs the server connected

	// Guarded by Registry.mu.
	depths   map[int]int        // calls in flight by sampling depth (> 0)
	sinks    map[*sink]struct{} // calls in flight whose nested sampling is charged
	session  *mcp.ClientSession // nil when disconnected
	err      string             // why it is disconnected
	tools    []*mcp.Tool        // as last listed
	connects int                // number of successful connections
}

// toolRef locates an exposed tool.
type toolRef struct {
	server   *server
	original string
}

// New validates o and returns a registry of its servers, none connected
// yet: [Registry.Start] connects them. Only an invalid configuration is an
// error. A loop engine and a sampling host may take the registry before it
// starts, so that the host answering the servers' sampling requests exists
// before any server connects.
func New(o Options) (*Registry, error) {
	minB, maxB := cmp.Or(o.MinBackoff, defaultMinBackoff), cmp.Or(o.MaxBackoff, defaultMaxBackoff)
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	r := &Registry{
		logger:  cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
		backoff: retry.Upstream{BaseDelay: minB, MaxDelay: max(minB, maxB)},
		servers: map[string]*server{},
		metrics: o.Metrics,
		index:   map[string]toolRef{},
	}
	r.life, r.cancel = context.WithCancel(context.Background())
	for name, cfg := range o.Servers {
		if name == StdServer && !o.DisableStd {
			return nil, fmt.Errorf("tools: mcpServers.%s: the name is reserved for the built-in server (disable it to reuse the name)", name)
		}
		s := r.newServer(name, TransportStdio)
		s.required = cfg.Required
		if cfg.ProtocolVersion != "" {
			s.version = cfg.ProtocolVersion
		}
		if cfg.Command != "" {
			s.dial = stdioDialer(cfg, s.logger)
		} else {
			s.transport, s.dial = TransportHTTP, httpDialer(cfg.URL, cfg.Headers)
			if s.version < ProtocolVersionMRTR {
				s.keepAlive = keepAlive // go-sdk pings only below 2026-07-28
			}
		}
	}
	if !o.DisableStd {
		now := o.Now
		if now == nil {
			now = time.Now
		}
		r.newServer(StdServer, TransportBuiltin).dial = inMemoryDialer(newStdServer(now))
	}
	for name := range r.servers {
		r.metrics.MCPServerUp.WithLabelValues(name).Set(0)
		r.metrics.ToolCallDuration.WithLabelValues(name)
	}
	return r, nil
}

// Start connects the built-in std server (synchronously, so that its tools
// are available at once) and starts connecting the configured servers in
// the background, with h answering their sampling requests (nil declares
// no sampling capability). It returns at once: a server that fails is
// retried with backoff, and only a failing std server is an error. ctx
// bounds the start of std; the background work lives until
// [Registry.Close]. A registry starts once.
func (r *Registry) Start(ctx context.Context, h SamplingHost) error {
	r.mu.Lock()
	started, closed := r.started, r.closed
	r.started = true
	r.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("tools: start: %w", errClosed)
	case started:
		return errors.New("tools: the registry is started already")
	}
	for _, s := range r.servers {
		s.client = r.newClient(s, h)
	}
	conns := map[*server]*conn{} // std's, connected at once
	if s, ok := r.servers[StdServer]; ok && s.transport == TransportBuiltin {
		c, tools, err := r.connect(ctx, s)
		if err != nil {
			return fmt.Errorf("tools: built-in server: %w", err)
		}
		conns[s] = c
		r.setUp(s, c, tools)
	}
	for _, s := range r.servers {
		r.wg.Add(1)
		go r.supervise(r.life, s, conns[s])
	}
	return nil
}

// newServer adds the server name to r.
func (r *Registry) newServer(name, transport string) *server {
	s := &server{name: name, transport: transport, version: ProtocolVersion, logger: r.logger.With("mcpServer", name),
		refresh: make(chan struct{}, 1), check: make(chan struct{}, 1), err: "connecting", depths: map[int]int{}, sinks: map[*sink]struct{}{}}
	r.servers[name] = s
	return s
}

// signal sends on a channel of one pending request unless one is pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// newClient returns the MCP client of one server; its list-changed handler
// asks the server's supervisor to re-list the tools. With a sampling host
// it declares sampling with tools ({"sampling":{"tools":{}}}) and answers
// sampling/createMessage; else, and for std, it declares no capability
// (the SDK's default would be roots).
func (r *Registry) newClient(s *server, h SamplingHost) *mcp.Client {
	o := &mcp.ClientOptions{
		Logger:       s.logger,
		KeepAlive:    s.keepAlive,
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			signal(s.refresh)
		},
	}
	if h != nil && s.transport != TransportBuiltin {
		//lint:ignore SA1019 sampled is a sampling client on purpose; go-sdk deprecates sampling from 2026-07-28 but keeps it working through the deprecation window
		o.CreateMessageWithToolsHandler = r.createMessageHandler(s, h)
	}
	return mcp.NewClient(&mcp.Implementation{Name: "sampled", Version: clientVersion}, o)
}

// connect opens a session to s and lists its tools.
func (r *Registry) connect(ctx context.Context, s *server) (*conn, []*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	t, release, err := s.dial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	session, err := s.client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: s.version})
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	c := &conn{session: session, release: release}
	// Versions are dates, which compare as strings.
	if got := session.InitializeResult().ProtocolVersion; got > s.version {
		err = fmt.Errorf("the server answered protocol version %s, newer than the %s sampled offered", got, s.version)
	}
	var tools []*mcp.Tool
	if err == nil {
		tools, err = listTools(ctx, session)
	}
	if err != nil {
		_ = c.close()
		return nil, nil, err
	}
	return c, tools, nil
}

// listTools lists every tool of a session, following pagination.
func listTools(ctx context.Context, session *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// supervise keeps s connected until ctx ends: it serves the session c (if
// any), and after a failure or the session's end reconnects with backoff.
// On return, s's session is closed.
func (r *Registry) supervise(ctx context.Context, s *server, c *conn) {
	defer r.wg.Done()
	defer r.setDown(s, errClosed)
	attempt := 0
	for {
		var err error
		if c == nil {
			var tools []*mcp.Tool
			if c, tools, err = r.connect(ctx, s); err == nil {
				r.setUp(s, c, tools)
				r.logger.Info("mcp server connected", "mcpServer", s.name, "tools", len(tools))
			}
		}
		if c != nil {
			start := time.Now()
			err = r.serve(ctx, s, c)
			c = nil
			if time.Since(start) > r.backoff.MaxDelay {
				attempt = 0 // it was up for a while: not a crash loop
			}
		}
		if ctx.Err() != nil {
			return
		}
		attempt++
		r.logger.Warn("mcp server not connected", "mcpServer", s.name, "attempt", attempt, "error", err)
		r.setDown(s, err)
		if retry.Sleep(ctx, r.backoff.Delay(attempt, nil)) != nil {
			return
		}
	}
}

// serve waits for the session of c to end, re-listing tools and checking
// that the server answers pings when asked. It closes the session and
// returns why it ended, or ctx's error.
func (r *Registry) serve(ctx context.Context, s *server, c *conn) error {
	done := make(chan error, 1)
	go func() { done <- c.session.Wait() }()
	var dead error // why serve closed the session itself
	for {
		select {
		case err := <-done:
			// The session is over; close it to release the transport.
			_ = c.close()
			switch {
			case dead != nil:
				return dead
			case err == nil:
				return errors.New("the server closed the session")
			default:
				return fmt.Errorf("session ended: %w", err)
			}
		case <-s.check:
			if dead != nil {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := c.session.Ping(pctx, nil)
			cancel()
			if err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				// The server is gone while the transport does not say so
				// (an HTTP endpoint refusing connections): reconnect. (A
				// closed connection ends the session by itself, with a
				// better reason.)
				dead = fmt.Errorf("no answer to ping: %w", err)
				_ = c.session.Close()
			}
		case <-s.refresh:
			lctx, cancel := context.WithTimeout(ctx, listTimeout)
			tools, err := listTools(lctx, c.session)
			cancel()
			if err != nil {
				r.logger.Warn("mcp server tool list refresh failed", "mcpServer", s.name, "error", err)
				continue
			}
			r.setTools(s, c, tools)
		case <-ctx.Done():
			err := c.close()
			<-done
			if err != nil {
				r.mu.Lock()
				r.errs = append(r.errs, fmt.Errorf("%s: %w", s.name, err))
				r.mu.Unlock()
			}
			return ctx.Err()
		}
	}
}

// setUp marks s connected over c with tools.
func (r *Registry) setUp(s *server, c *conn, tools []*mcp.Tool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.session = c.session
	s.err = ""
	s.tools = tools
	s.connects++
	r.rebuild()
	r.metrics.MCPServerUp.WithLabelValues(s.name).Set(1)
}

// setTools replaces the tools of s, if c is still its session.
func (r *Registry) setTools(s *server, c *conn, tools []*mcp.Tool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.session != c.session {
		return
	}
	s.tools = tools
	r.rebuild()
}

// setDown marks s disconnected because of err; its tools stay listed.
func (r *Registry) setDown(s *server, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.session = nil
	s.err = err.Error()
	r.metrics.MCPServerUp.WithLabelValues(s.name).Set(0)
}

// rebuild recomputes the exposed tools from every server's list. Two tools
// whose exposed names collide keep the name in the order of their unmapped
// "<server>__<tool>" names; the later ones get a hashed name. r.mu must be
// held.
func (r *Registry) rebuild() {
	type entry struct {
		s    *server
		t    *mcp.Tool
		full string
	}
	var all []entry
	for _, s := range r.servers {
		for _, t := range s.tools {
			all = append(all, entry{s, t, s.name + "__" + t.Name})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].full < all[j].full })
	tools := make([]Tool, 0, len(all))
	index := make(map[string]toolRef, len(all))
	for _, e := range all {
		name := ExposedName(e.s.name, e.t.Name)
		if _, dup := index[name]; dup {
			name = hashedName(name, e.full)
			if _, dup := index[name]; dup {
				r.logger.Warn("mcp tool skipped: its name collides", "mcpServer", e.s.name, "tool", e.t.Name)
				continue
			}
		}
		index[name] = toolRef{server: e.s, original: e.t.Name}
		for _, outcome := range []string{outcomeOK, outcomeToolError, outcomeError} {
			r.metrics.ToolCalls.WithLabelValues(name, outcome) // at 0 from the tool's first listing
		}
		tools = append(tools, Tool{
			Name:        name,
			Server:      e.s.name,
			Original:    e.t.Name,
			Description: e.t.Description,
			InputSchema: inputSchema(e.t.InputSchema),
		})
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	r.tools = tools
	r.index = index
}

// inputSchema returns a tool's input schema as JSON, {"type":"object"} when
// it has none.
func inputSchema(v any) json.RawMessage {
	if v != nil {
		if b, err := json.Marshal(v); err == nil && string(b) != "null" {
			return b
		}
	}
	return json.RawMessage(`{"type":"object"}`)
}

// Tools returns the tools available now, sorted by Name. Tools of a
// disconnected server stay listed.
func (r *Registry) Tools() []Tool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Tool(nil), r.tools...)
}

// Status reports every server, sorted by Name.
func (r *Registry) Status() []ServerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ServerStatus, 0, len(r.servers))
	for _, name := range slices.Sorted(maps.Keys(r.servers)) {
		s := r.servers[name]
		st := ServerStatus{Name: name, Transport: s.transport, Connected: s.session != nil, Tools: len(s.tools), Required: s.required}
		if s.session == nil {
			st.Error = s.err
		}
		out = append(out, st)
	}
	return out
}

// Ready returns nil when every required server ([ServerOptions.Required])
// is connected, else an error wrapping [ErrUnavailable] that names the
// required servers that are not, with the reason. A server that is not
// required and not connected only degrades the registry: [Registry.Status]
// shows it, and calls of its tools fail.
func (r *Registry) Ready() error {
	var down []string
	for _, st := range r.Status() {
		if st.Required && !st.Connected {
			// Names only: /readyz is open without a key, and a
			// connection error can name paths and addresses. /v1/tools
			// and the log have the error.
			down = append(down, st.Name)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("%w: required MCP servers not connected: %s", ErrUnavailable, strings.Join(down, ", "))
	}
	return nil
}

// Call calls the tool with its exposed name and arguments (a JSON object;
// empty means {}). A tool-level failure is a Result with IsError and a nil
// error. An unknown name is an error wrapping [ErrUnknownTool]; a server
// that is not connected, or whose transport broke during the call, an error
// wrapping [ErrUnavailable] (as is a call that [Registry.Close] cancels);
// any other protocol error, or ctx ending, is an error too. Ending ctx
// cancels the call on the server (notifications/cancelled).
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) (*Result, error) {
	r.mu.Lock()
	ref, ok := r.index[name]
	var session *mcp.ClientSession
	if ok {
		session = ref.server.session
	}
	r.mu.Unlock()
	label, outcome := "other", outcomeError
	defer func() { r.metrics.ToolCalls.WithLabelValues(label, outcome).Inc() }()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	label = name
	if session == nil {
		return nil, fmt.Errorf("tools: call %s: %w: %s", name, ErrUnavailable, ref.server.name)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	defer r.enterDepth(ref.server, SamplingDepth(ctx))()
	defer r.enterSink(ctx, ref.server)()
	// Close cancels the call, so that it does not wait for the call.
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.life, cancel)()
	start := time.Now()
	callCtx, span := callSpan(callCtx, ref.server.name, ref.original)
	res, err := session.CallTool(callCtx, &mcp.CallToolParams{Meta: telemetry.InjectMeta(callCtx, callMeta(ctx)), Name: ref.original, Arguments: args})
	r.metrics.ToolCallDuration.WithLabelValues(ref.server.name).Observe(time.Since(start).Seconds())
	endCallSpan(span, res, err)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("tools: call %s: %w", name, ctx.Err())
		case callCtx.Err() != nil:
			return nil, fmt.Errorf("tools: call %s: %w: %w", name, ErrUnavailable, errClosed)
		case !transportError(err):
			return nil, fmt.Errorf("tools: call %s: %w", name, err)
		default:
			// The transport broke (a dead child, an unreachable URL); have
			// the supervisor check whether the server is still there.
			signal(ref.server.check)
			return nil, fmt.Errorf("tools: call %s: %w: %w", name, ErrUnavailable, err)
		}
	}
	out, err := convertResult(res)
	if err != nil {
		return nil, fmt.Errorf("tools: call %s: %w", name, err)
	}
	outcome = outcomeOK
	if out.IsError {
		outcome = outcomeToolError
	}
	return out, nil
}

// transportError reports whether a call failed because the way to the
// server broke (a dead child, a refused connection, a closing session)
// rather than with an error the server returned. The SDK's transport
// reports -32005 for a request it could not send, and -32003 and -32004
// for calls made while either side is closing.
func transportError(err error) bool {
	var wire *jsonrpc.Error
	return !errors.As(err, &wire) || slices.Contains([]int64{-32005, -32003, -32004}, wire.Code)
}

// convertResult converts the SDK's result.
func convertResult(res *mcp.CallToolResult) (*Result, error) {
	content, err := sampler.FromMCPContents(res.Content)
	if err != nil {
		return nil, err
	}
	if content == nil {
		content = []sampler.Content{}
	}
	out := &Result{Content: content, IsError: res.IsError}
	if res.StructuredContent != nil {
		if out.StructuredContent, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, fmt.Errorf("structuredContent: %w", err)
		}
	}
	return out, nil
}

// Close cancels the calls in flight (they fail with [ErrUnavailable]),
// closes every session (stdio children are asked to exit by closing their
// stdin, then terminated after 5s and killed after 10s), stops the
// reconnect goroutines and waits for all of it. It returns the errors of
// closing sessions, if any. Calling it again does nothing.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()

	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := errors.Join(r.errs...); err != nil {
		return fmt.Errorf("tools: close: %w", err)
	}
	return nil
}

// Outcomes of a tool call, the values of the outcome label.
const (
	outcomeOK        = "ok"
	outcomeToolError = "tool_error"
	outcomeError     = "error"
)
