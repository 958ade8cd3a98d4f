package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/testing/mcptest"
)

// TestClose checks that Close ends every goroutine the registry started
// and every child process. It does not run in parallel, so that the leak
// check sees this test's goroutines alone.
func TestClose(t *testing.T) {
	bin := mcpServer(t) // build first: the build is not part of the check
	srv := newMCPServer()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	// The HTTP server runs on; the connections the registry made to it
	// must end with it.
	ignore := goleak.IgnoreCurrent()

	ctx := context.Background()
	r, err := New(Options{Servers: map[string]ServerOptions{
		"one": {Command: bin},
		"two": {Command: bin},
		"web": {URL: ts.URL},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, server := range []string{"one", "two"} {
		waitConnected(t, r, server)
		res := mustCall(t, r, server+"__pid", nil)
		var out struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(res.StructuredContent, &out); err != nil || out.PID <= 0 {
			t.Fatalf("pid: %s, %v", res.StructuredContent, err)
		}
		pids = append(pids, out.PID)
	}
	mustCall(t, r, "std__now", nil)
	waitConnected(t, r, "web")
	mustCall(t, r, "web__echo", map[string]any{"text": "x"})

	// Close cancels a call in flight rather than wait for it.
	marker := filepath.Join(t.TempDir(), "marker")
	args, _ := json.Marshal(map[string]any{"ms": 600000, "marker": marker})
	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, "one__slow", args)
		errc <- err
	}()
	mcptest.PollFile(t, marker, "started", waitTimeout)

	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrUnavailable) {
		t.Errorf("call in flight at Close = %v, want ErrUnavailable", err)
	}
	goleak.VerifyNone(t, ignore)
	for _, pid := range pids {
		// Close waited for the children, so they are reaped and gone.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child %d: kill(0) = %v, want ESRCH", pid, err)
		}
	}

	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.Call(ctx, "one__pid", nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Call after Close = %v, want ErrUnavailable", err)
	}
	for _, st := range r.Status() {
		if st.Connected {
			t.Errorf("%s is connected after Close", st.Name)
		}
	}
}

// TestStartErrors checks the configurations New refuses.
func TestStartErrors(t *testing.T) {
	t.Parallel()
	t.Run("reserved name", func(t *testing.T) {
		r, err := New(Options{Servers: map[string]ServerOptions{"std": {Command: "x"}}})
		if err == nil {
			_ = r.Close()
			t.Fatal("New succeeded")
		}
	})

	t.Run("started twice, or after Close", func(t *testing.T) {
		r := start(t, Options{})
		if err := r.Start(context.Background(), nil); err == nil {
			t.Error("a second Start succeeded")
		}
		closed, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := closed.Close(); err != nil {
			t.Fatal(err)
		}
		if err := closed.Start(context.Background(), nil); !errors.Is(err, errClosed) {
			t.Errorf("Start after Close = %v, want errClosed", err)
		}
	})

	t.Run("std may be replaced when disabled", func(t *testing.T) {
		r := start(t, Options{Servers: map[string]ServerOptions{"std": {URL: closedURL(t)}}, DisableStd: true})
		if st := r.Status(); len(st) != 1 || st[0].Transport != TransportHTTP {
			t.Errorf("Status = %+v", st)
		}
	})

	t.Run("a required command that does not exist", func(t *testing.T) {
		r := start(t, Options{Servers: map[string]ServerOptions{"ghost": {Command: "/nonexistent/mcp-server", Required: true}}})
		waitFor(t, r, "a failed start", func() bool { return statusOf(t, r, "ghost").Error != "connecting" })
		if err := r.Ready(); !errors.Is(err, ErrUnavailable) || !strings.HasSuffix(err.Error(), "not connected: ghost") {
			t.Errorf("Ready = %v, want an error naming ghost", err)
		}
		mustCall(t, r, "std__now", nil)
	})

	// The example configuration's servers need uvx, which a machine may
	// lack: a server that is not required degrades the registry (its
	// status says why) without making it not ready.
	t.Run("an optional command that does not exist", func(t *testing.T) {
		r := start(t, Options{Servers: map[string]ServerOptions{
			"ghost": {Command: "/nonexistent/mcp-server"},
			"must":  {Command: "/nonexistent/other-server", Required: true},
		}})
		waitFor(t, r, "failed starts", func() bool {
			return statusOf(t, r, "ghost").Error != "connecting" && statusOf(t, r, "must").Error != "connecting"
		})
		err := r.Ready()
		if !errors.Is(err, ErrUnavailable) || !strings.HasSuffix(err.Error(), "not connected: must") || strings.Contains(err.Error(), "ghost") {
			t.Errorf("Ready = %v, want an error naming must alone", err)
		}
		if st := statusOf(t, r, "ghost"); st.Connected || st.Required || st.Error == "" {
			t.Errorf("status %+v, want not connected, not required, with its error", st)
		}
	})

	t.Run("optional servers down: ready", func(t *testing.T) {
		r := start(t, Options{Servers: map[string]ServerOptions{"ghost": {Command: "/nonexistent/mcp-server"}}})
		waitFor(t, r, "a failed start", func() bool { return statusOf(t, r, "ghost").Error != "connecting" })
		if err := r.Ready(); err != nil {
			t.Errorf("Ready = %v, want nil: ghost is not required", err)
		}
		mustCall(t, r, "std__now", nil)
	})
}
