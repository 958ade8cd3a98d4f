package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testnet"
)

type echoIn struct {
	Text string `json:"text"`
}

func echoTool(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
}

// newMCPServer returns an in-process MCP server with the tool echo.
func newMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "inprocess", Version: "test"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text."}, echoTool)
	return srv
}

// requestLog records the method and chosen headers of every request.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" key="+r.Header.Get("X-Api-Key")+" auth="+r.Header.Get("Authorization"))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) distinct() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.reqs)
	slices.Sort(out)
	return slices.Compact(out)
}

// TestHTTP connects over streamable HTTP to an in-process server.
func TestHTTP(t *testing.T) {
	t.Parallel()
	srv := newMCPServer()
	var log requestLog
	ts := httptest.NewServer(log.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	t.Cleanup(ts.Close) // after the registry's Close, registered later

	r := start(t, Options{
		Servers: map[string]ServerOptions{"web": {
			URL:     ts.URL,
			Headers: map[string]string{"X-Api-Key": "s3cret", "Authorization": "Bearer t0k"},
		}},
	})
	waitConnected(t, r, "web")

	want := []ServerStatus{
		{Name: "std", Transport: "builtin", Connected: true, Tools: 4},
		{Name: "web", Transport: "http", Connected: true, Tools: 1},
	}
	if diff := cmp.Diff(want, r.Status()); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"web__echo"}, toolNames(r, "web")); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	got := mustCall(t, r, "web__echo", map[string]any{"text": "over http"})
	if diff := cmp.Diff(&Result{Content: []sampler.Content{sampler.TextBlock("over http")}}, got); diff != "" {
		t.Errorf("echo (-want +got):\n%s", diff)
	}

	// A tool added at run time reaches the registry through
	// notifications/tools/list_changed on the standalone SSE stream.
	mcp.AddTool(srv, &mcp.Tool{Name: "late", Description: "Added at run time."}, echoTool)
	waitFor(t, r, "web__late", func() bool { return slices.Contains(toolNames(r, "web"), "web__late") })
	if got := sampler.TextOf(mustCall(t, r, "web__late", map[string]any{"text": "hi"}).Content); got != "hi" {
		t.Errorf("late said %q", got)
	}

	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Every request, including the standalone GET stream and the DELETE
	// that ends the session, carried the configured headers.
	wantReqs := []string{
		"DELETE key=s3cret auth=Bearer t0k",
		"GET key=s3cret auth=Bearer t0k",
		"POST key=s3cret auth=Bearer t0k",
	}
	if diff := cmp.Diff(wantReqs, log.distinct()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// closedURL returns the URL of a port that refuses connections.
func closedURL(t *testing.T) string {
	return "http://" + testnet.RefusingAddr(t) + "/mcp"
}

// TestHTTPDown checks that a server that is down at start is reported and
// leaves the rest of the registry working; being required, it makes the
// registry not ready.
func TestHTTPDown(t *testing.T) {
	t.Parallel()
	r := start(t, Options{
		Servers:    map[string]ServerOptions{"down": {URL: closedURL(t), Required: true}},
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond,
	})
	waitFor(t, r, "a failed connection", func() bool { return statusOf(t, r, "down").Error != "connecting" })

	st := statusOf(t, r, "down")
	if st.Connected || !strings.Contains(st.Error, "connect") || st.Transport != "http" || st.Tools != 0 || !st.Required {
		t.Errorf("status %+v, want disconnected with an error", st)
	}
	err := r.Ready()
	if !errors.Is(err, ErrUnavailable) || !strings.HasSuffix(err.Error(), "not connected: down") {
		t.Errorf("Ready = %v, want an error naming down alone", err)
	}
	if got := sampler.TextOf(mustCall(t, r, "std__calculate", map[string]any{"expression": "6 * 7"}).Content); got != "42" {
		t.Errorf("calculate said %q", got)
	}
	if names := toolNames(r, "down"); len(names) != 0 {
		t.Errorf("tools of a server never connected: %v", names)
	}
}

// TestHTTPLater checks that a server that comes up after the start is
// connected by the backoff loop.
func TestHTTPLater(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	srv := newMCPServer()
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		mcpHandler.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)

	r := start(t, Options{
		Servers:    map[string]ServerOptions{"later": {URL: ts.URL, Required: true}},
		DisableStd: true,
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond,
	})
	waitFor(t, r, "a failed connection", func() bool { return statusOf(t, r, "later").Error != "connecting" })
	if err := r.Ready(); err == nil {
		t.Error("Ready = nil while the server is down")
	}
	up.Store(true)
	waitConnected(t, r, "later")
	if got := sampler.TextOf(mustCall(t, r, "later__echo", map[string]any{"text": "up"}).Content); got != "up" {
		t.Errorf("echo said %q", got)
	}
	if err := r.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// TestHTTPChild runs the test server program over streamable HTTP.
func TestHTTPChild(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(mcpServer(t), "-http", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := sync.OnceFunc(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	t.Cleanup(kill)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the URL: %v", err)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("URL %q", url)
	}

	r := start(t, Options{Servers: map[string]ServerOptions{"child": {URL: url, Required: true}}, DisableStd: true})
	waitConnected(t, r, "child")
	want := []string{"child__add", "child__add_tool", "child__crash", "child__echo", "child__fail", "child__getenv", "child__pid", "child__slow"}
	if diff := cmp.Diff(want, toolNames(r, "child")); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	got := mustCall(t, r, "child__add", map[string]any{"a": 40, "b": 2})
	wantRes := &Result{Content: []sampler.Content{sampler.TextBlock("42")}, StructuredContent: json.RawMessage(`{"sum":42}`)}
	if diff := cmp.Diff(wantRes, got); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}
	if got := mustCall(t, r, "child__fail", nil); !got.IsError {
		t.Errorf("fail: %+v, want IsError", got)
	}
	mustCall(t, r, "child__add_tool", nil)
	waitFor(t, r, "child__late", func() bool { return slices.Contains(toolNames(r, "child"), "child__late") })

	// A dead HTTP server: the failed call has the registry ping it, which
	// fails too, so the server is marked disconnected.
	kill()
	if _, err := call(t, r, "child__echo", map[string]any{"text": "x"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Call after the server died = %v, want ErrUnavailable", err)
	}
	waitFor(t, r, "the dead server to be noticed", func() bool { return !statusOf(t, r, "child").Connected })
	if err := r.Ready(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Ready = %v, want ErrUnavailable", err)
	}
	if _, err := call(t, r, "child__echo", map[string]any{"text": "x"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Call to the dead server = %v, want ErrUnavailable", err)
	}
}
