package tools

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/telemetry"
)

// conn is one live client session and what must be released after it.
type conn struct {
	session *mcp.ClientSession
	// release runs after the session is closed.
	release func()
}

// close closes the session (for stdio: stdin is closed and the child is
// waited for, terminated after 5s and killed after 10s) and releases what
// the dialer acquired.
func (c *conn) close() error {
	err := c.session.Close()
	c.release()
	return err
}

// dialer returns a new transport to one server, and what to release once
// the session over it is closed.
type dialer func(ctx context.Context) (t mcp.Transport, release func(), err error)

// stdioDialer starts a new child process per session: the command with its
// arguments, its stderr written to logger line by line, and a minimal
// environment, as the MCP SDKs' stdio transports give: PATH, HOME, USER,
// LANG and TMPDIR of sampled's, plus the configured variables. No secret
// of sampled (SAMPLING_API_KEY, a key's keyEnv) reaches the child.
func stdioDialer(s ServerOptions, logger *slog.Logger) dialer {
	env := []string{} // not nil, which would pass sampled's whole environment
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	return func(context.Context) (mcp.Transport, func(), error) {
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = env
		cmd.Stderr = &lineLogger{logger: logger}
		// A grandchild holding stderr open must not block Wait forever.
		cmd.WaitDelay = 5 * time.Second
		return samplingTransport{&mcp.CommandTransport{Command: cmd}}, func() {}, nil
	}
}

// httpDialer connects over streamable HTTP with a client of its own
// (never http.DefaultClient) that adds headers to every request; the idle
// connections of a session are closed when it ends.
func httpDialer(url string, headers map[string]string) dialer {
	base := http.DefaultTransport.(*http.Transport).Clone()
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &headerTransport{base: telemetry.Transport(base), headers: h}}}
	return func(context.Context) (mcp.Transport, func(), error) {
		return t, base.CloseIdleConnections, nil
	}
}

// inMemoryDialer connects to srv, served in-process over an in-memory
// transport. Closing the client session ends the server session, which
// release waits for.
func inMemoryDialer(srv *mcp.Server) dialer {
	return func(ctx context.Context) (mcp.Transport, func(), error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("serve: %w", err)
		}
		return ct, func() {
			_ = ss.Close()
			_ = ss.Wait()
		}, nil
	}
}

// headerTransport adds configured headers to each request. It does not
// replace a header the MCP client set itself (Accept, Content-Type,
// Mcp-Session-Id, Mcp-Protocol-Version), which the protocol needs.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

// RoundTrip implements http.RoundTripper on a copy of req. The sampling
// requests of an event stream answering it are checked, as on stdio
// ([checkParams]).
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for k, vs := range t.headers {
		if _, ok := r.Header[k]; !ok {
			r.Header[k] = vs
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &eventFilter{ReadCloser: resp.Body, r: bufio.NewReader(resp.Body)}
	}
	return resp, err
}

// eventFilter passes a server-sent event stream on event by event,
// replacing the params of sampling requests that go-sdk cannot decode
// ([checkParams]). An event longer than go-sdk reads whole passes on
// unchanged, for go-sdk to refuse.
type eventFilter struct {
	io.ReadCloser // the body; Close closes it
	r             *bufio.Reader
	out           []byte // read and not yet returned
	skip          bool   // within an event too long to check
	err           error  // of the body, once out is returned
}

// Read returns the stream, an event at a time.
func (f *eventFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 && f.err == nil {
		f.out, f.err = f.next()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if n > 0 {
		return n, nil
	}
	return 0, f.err
}

// next reads the next event (up to its blank line), checked; or the next
// piece of one too long to check.
func (f *eventFilter) next() ([]byte, error) {
	var ev []byte
	for {
		line, err := f.r.ReadSlice('\n')
		ev = append(ev, line...)
		end := err == nil && len(bytes.TrimRight(line, "\r\n")) == 0
		switch {
		case err != nil && err != bufio.ErrBufferFull:
			return ev, err
		case f.skip:
			f.skip = !end
			return ev, nil
		case end:
			return checkEvent(ev), nil
		case len(ev) > mcp.DefaultMaxEventSize:
			f.skip = true
			return ev, nil
		}
	}
}

// checkEvent returns ev, or its data rewritten when it is a sampling
// request whose params go-sdk cannot decode.
func checkEvent(ev []byte) []byte {
	if !bytes.Contains(ev, []byte("sampling/createMessage")) {
		return ev // not worth decoding
	}
	var data [][]byte
	var other []byte // its other fields, without the blank line
	for line := range bytes.Lines(ev) {
		field := bytes.TrimRight(line, "\r\n")
		if v, ok := bytes.CutPrefix(field, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(v, []byte(" ")))
		} else if len(field) > 0 {
			other = append(other, line...)
		}
	}
	msg, err := jsonrpc.DecodeMessage(bytes.Join(data, []byte("\n")))
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !isSampling(req) {
		return ev
	}
	if req.Params, ok = checkParams(req.Params); ok {
		return ev
	}
	b, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return ev
	}
	return fmt.Appendf(other, "data: %s\n\n", b)
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
