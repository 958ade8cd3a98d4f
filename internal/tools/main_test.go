package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/testwait"
	"go.uber.org/goleak"
)

// testServerBin builds testdata/mcpserver once per test binary and returns
// the path of the executable. TestMain sets it.
var testServerBin func() (string, error)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tools-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	testServerBin = sync.OnceValues(func() (string, error) { return mcptest.BuildServer(dir) })
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// mcpServer returns the path of the test MCP server program.
func mcpServer(t *testing.T) string {
	t.Helper()
	bin, err := testServerBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// waitTimeout bounds every wait of the tests; generous for -race on two
// cores.
const waitTimeout = 30 * time.Second

// start starts a registry that the test closes at its end.
func start(t *testing.T, o Options) *Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := r.Start(ctx, nil); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return r
}

// waitConnected waits until the server is connected.
func waitConnected(t *testing.T, r *Registry, server string) {
	t.Helper()
	waitFor(t, r, server+" connected", func() bool { return statusOf(t, r, server).Connected })
}

// waitFor polls the registry until cond holds.
func waitFor(t *testing.T, r *Registry, what string, cond func() bool) {
	t.Helper()
	testwait.Poll(t, 5*time.Millisecond, waitTimeout, what, cond)
}

// call calls a tool with args marshalled to JSON and a bounded context.
func call(t *testing.T, r *Registry, name string, args any) (*Result, error) {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return r.Call(ctx, name, b)
}

// mustCall is call for calls that must not fail at the protocol level.
func mustCall(t *testing.T, r *Registry, name string, args any) *Result {
	t.Helper()
	res, err := call(t, r, name, args)
	if err != nil {
		t.Fatalf("Call(%s): %v", name, err)
	}
	return res
}

// toolNames returns the exposed names of the tools of server.
func toolNames(r *Registry, server string) []string {
	var names []string
	for _, tool := range r.Tools() {
		if tool.Server == server {
			names = append(names, tool.Name)
		}
	}
	return names
}

// statusOf returns the status of one server.
func statusOf(t *testing.T, r *Registry, server string) ServerStatus {
	t.Helper()
	for _, st := range r.Status() {
		if st.Name == server {
			return st
		}
	}
	t.Fatalf("no status for %s", server)
	return ServerStatus{}
}

// toolByName returns the listed tool with that exposed name.
func toolByName(t *testing.T, r *Registry, name string) Tool {
	t.Helper()
	for _, tool := range r.Tools() {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s", name)
	return Tool{}
}

// connects returns how many times a server has been connected.
func connects(r *Registry, server string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers[server].connects
}
