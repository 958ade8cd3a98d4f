package tools

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conn is one live client session and what must be released after it.
type conn struct {
	session *mcp.ClientSession
	// release runs after the session is closed; nil means nothing to do.
	release func()
}

// close closes the session (for stdio: stdin is closed and the child is
// waited for, terminated after 5s and killed after 10s) and releases what
// the dialer acquired.
func (c *conn) close() error {
	err := c.session.Close()
	if c.release != nil {
		c.release()
	}
	return err
}

// dialer opens a new session to one server with client.
type dialer func(ctx context.Context, client *mcp.Client) (*conn, error)

// sessionOptions are the options of a client session offering version
// ("" means ProtocolVersion).
func sessionOptions(version string) *mcp.ClientSessionOptions {
	if version == "" {
		version = ProtocolVersion
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: version}
}

// checkVersion closes session and fails when the server answered a protocol
// version newer than the one offered.
func checkVersion(session *mcp.ClientSession, offered string) error {
	if offered == "" {
		offered = ProtocolVersion
	}
	got := ""
	if ir := session.InitializeResult(); ir != nil {
		got = ir.ProtocolVersion
	}
	// Versions are dates, which compare as strings.
	if got > offered {
		_ = session.Close()
		return fmt.Errorf("the server answered protocol version %s, newer than the %s sampled offered", got, offered)
	}
	return nil
}

// stdioDialer starts a new child process per session: the command with its
// arguments, the environment of sampled plus the configured variables, and
// its stderr written to logger line by line.
func stdioDialer(s ServerOptions, logger *slog.Logger) dialer {
	env := os.Environ()
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.Env[k])
	}
	return func(ctx context.Context, client *mcp.Client) (*conn, error) {
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = env
		cmd.Stderr = &lineLogger{logger: logger}
		// A grandchild holding stderr open must not block Wait forever.
		cmd.WaitDelay = 5 * time.Second
		t := samplingTransport{&mcp.CommandTransport{Command: cmd}}
		session, err := client.Connect(ctx, t, sessionOptions(s.ProtocolVersion))
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", s.Command, err)
		}
		if err := checkVersion(session, s.ProtocolVersion); err != nil {
			return nil, err
		}
		return &conn{session: session}, nil
	}
}

// httpDialer connects over streamable HTTP with hc, offering version.
func httpDialer(url, version string, hc *http.Client) dialer {
	return func(ctx context.Context, client *mcp.Client) (*conn, error) {
		t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}
		session, err := client.Connect(ctx, t, sessionOptions(version))
		if err != nil {
			return nil, err
		}
		if err := checkVersion(session, version); err != nil {
			return nil, err
		}
		return &conn{session: session}, nil
	}
}

// inMemoryDialer connects to srv, served in-process over an in-memory
// transport. Closing the client session ends the server session, which
// release waits for.
func inMemoryDialer(srv *mcp.Server) dialer {
	return func(ctx context.Context, client *mcp.Client) (*conn, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		release := func() {
			_ = ss.Close()
			_ = ss.Wait()
		}
		session, err := client.Connect(ctx, ct, sessionOptions(""))
		if err != nil {
			release()
			return nil, err
		}
		return &conn{session: session, release: release}, nil
	}
}

// newHTTPClient returns a client of its own (never http.DefaultClient) that
// adds headers to every request, and its transport, whose idle connections
// the registry closes when it is closed.
func newHTTPClient(headers map[string]string) (*http.Client, *http.Transport) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	return &http.Client{Transport: &headerTransport{base: base, headers: h}}, base
}

// headerTransport adds configured headers to each request. It does not
// replace a header the MCP client set itself (Accept, Content-Type,
// Mcp-Session-Id, Mcp-Protocol-Version), which the protocol needs.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

// RoundTrip implements http.RoundTripper on a copy of req.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	for k, vs := range t.headers {
		if _, ok := r.Header[k]; !ok {
			r.Header[k] = vs
		}
	}
	return t.base.RoundTrip(r)
}

// maxLogLine bounds one logged line of a child's stderr.
const maxLogLine = 4096

// lineLogger logs what a child process writes to stderr, one record per
// line. exec.Cmd writes to it from a single goroutine.
type lineLogger struct {
	logger *slog.Logger
	buf    []byte
}

// Write logs every complete line of p and keeps the rest for later.
func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxLogLine {
		l.log(l.buf)
		l.buf = nil
	}
	return len(p), nil
}

func (l *lineLogger) log(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	l.logger.Info("mcp server stderr", "line", string(line))
}
