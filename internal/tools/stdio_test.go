package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/mcptest"
)

func TestStdio(t *testing.T) {
	t.Parallel()
	refuse := filepath.Join(t.TempDir(), "refuse")
	m := metrics.New(prometheus.NewRegistry())
	r := start(t, Options{
		Servers: map[string]ServerOptions{"stdio": {
			Command:  mcpServer(t),
			Args:     []string{"-refuse", refuse},
			Env:      map[string]string{"MCPSERVER_GREETING": "bonjour"},
			Required: true,
		}},
		DisableStd: true,
		Metrics:    m,
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond,
	})
	waitConnected(t, r, "stdio")
	baseTools := []string{"stdio__add", "stdio__add_tool", "stdio__crash", "stdio__echo", "stdio__fail", "stdio__getenv", "stdio__pid", "stdio__slow"}

	t.Run("list", func(t *testing.T) {
		// Eight tools in pages of two: the registry follows the cursor.
		if diff := cmp.Diff(baseTools, toolNames(r, "stdio")); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
		echo := toolByName(t, r, "stdio__echo")
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(echo.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		if echo.Original != "echo" || echo.Server != "stdio" || echo.Description != "Echo the text." || schema.Type != "object" || schema.Properties["text"] == nil {
			t.Errorf("echo = %+v", echo)
		}
		want := []ServerStatus{{Name: "stdio", Transport: "stdio", Connected: true, Tools: 8, Required: true}}
		if diff := cmp.Diff(want, r.Status()); diff != "" {
			t.Errorf("Status (-want +got):\n%s", diff)
		}
		if err := r.Ready(); err != nil {
			t.Errorf("Ready: %v", err)
		}
	})

	t.Run("calls", func(t *testing.T) {
		isError := func(text string) *Result {
			return &Result{Content: []sampler.Content{sampler.TextBlock(text)}, IsError: true}
		}
		tests := []struct {
			name string
			tool string
			args any
			want *Result
		}{
			{"echo", "stdio__echo", map[string]any{"text": "héllo"}, &Result{Content: []sampler.Content{sampler.TextBlock("héllo")}}},
			{"add", "stdio__add", map[string]any{"a": 2, "b": 3.5}, &Result{
				Content:           []sampler.Content{sampler.TextBlock("5.5")},
				StructuredContent: json.RawMessage(`{"sum":5.5}`),
			}},
			{"fail", "stdio__fail", map[string]any{}, isError("deliberate failure")},
			{"nil arguments", "stdio__fail", nil, isError("deliberate failure")},
			{"configured env", "stdio__getenv", map[string]any{"text": "MCPSERVER_GREETING"}, &Result{Content: []sampler.Content{sampler.TextBlock("bonjour")}}},
			{"inherited env", "stdio__getenv", map[string]any{"text": "PATH"}, &Result{Content: []sampler.Content{sampler.TextBlock(os.Getenv("PATH"))}}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var args json.RawMessage
				if tt.args != nil {
					args, _ = json.Marshal(tt.args)
				}
				got, err := r.Call(context.Background(), tt.tool, args)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("unknown tool", func(t *testing.T) {
		for _, name := range []string{"stdio__nope", "echo", ""} {
			if _, err := call(t, r, name, map[string]any{}); !errors.Is(err, ErrUnknownTool) {
				t.Errorf("Call(%q) = %v, want ErrUnknownTool", name, err)
			}
		}
	})

	t.Run("list changed", func(t *testing.T) {
		if got := sampler.TextOf(mustCall(t, r, "stdio__add_tool", nil).Content); got != "added" {
			t.Fatalf("add_tool said %q", got)
		}
		waitFor(t, r, "stdio__late", func() bool { return slices.Contains(toolNames(r, "stdio"), "stdio__late") })
		if got := sampler.TextOf(mustCall(t, r, "stdio__late", map[string]any{"text": "hi"}).Content); got != "hi" {
			t.Errorf("late said %q", got)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "marker")
		args, _ := json.Marshal(map[string]any{"ms": 60000, "marker": marker})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := r.Call(ctx, "stdio__slow", args)
			errc <- err
		}()
		mcptest.PollFile(t, marker, "started", waitTimeout)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Call = %v, want context.Canceled", err)
		}
		mcptest.PollFile(t, marker, "cancelled", waitTimeout)
	})

	t.Run("crash and reconnect", func(t *testing.T) {
		// While the refuse file exists, the server cannot start again.
		if err := os.WriteFile(refuse, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := call(t, r, "stdio__crash", nil); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Call(crash) = %v, want ErrUnavailable", err)
		}
		waitFor(t, r, "a failed reconnect", func() bool {
			st := statusOf(t, r, "stdio")
			return !st.Connected && strings.Contains(st.Error, "connect")
		})
		st := statusOf(t, r, "stdio")
		if st.Connected || st.Tools != 9 || st.Transport != "stdio" {
			t.Errorf("status %+v, want disconnected with its 9 tools", st)
		}
		if !slices.Contains(toolNames(r, "stdio"), "stdio__echo") {
			t.Errorf("tools of the dead server were dropped: %v", toolNames(r, "stdio"))
		}
		if _, err := call(t, r, "stdio__echo", map[string]any{"text": "x"}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Call(echo) = %v, want ErrUnavailable", err)
		}
		if err := r.Ready(); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "stdio") {
			t.Errorf("Ready = %v, want an error naming stdio", err)
		}
		if got := testutil.ToFloat64(m.MCPServerUp.WithLabelValues("stdio")); got != 0 {
			t.Errorf("MCPServerUp = %v, want 0", got)
		}

		if err := os.Remove(refuse); err != nil {
			t.Fatal(err)
		}
		waitConnected(t, r, "stdio")
		if n := connects(r, "stdio"); n != 2 {
			t.Errorf("connected %d times, want 2", n)
		}
		if got := sampler.TextOf(mustCall(t, r, "stdio__echo", map[string]any{"text": "back"}).Content); got != "back" {
			t.Errorf("echo said %q", got)
		}
		// The new process has no late tool: reconnecting re-listed.
		if diff := cmp.Diff(baseTools, toolNames(r, "stdio")); diff != "" {
			t.Errorf("tools after reconnect (-want +got):\n%s", diff)
		}
		if got := testutil.ToFloat64(m.MCPServerUp.WithLabelValues("stdio")); got != 1 {
			t.Errorf("MCPServerUp = %v, want 1", got)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		tests := []struct {
			tool, outcome string
			want          float64
		}{
			{"stdio__echo", "ok", 2},
			{"stdio__echo", "error", 1},
			{"stdio__add", "ok", 1},
			{"stdio__fail", "tool_error", 2},
			{"stdio__slow", "error", 1},
			{"stdio__crash", "error", 1},
			{"other", "error", 3},
		}
		for _, tt := range tests {
			if got := testutil.ToFloat64(m.ToolCalls.WithLabelValues(tt.tool, tt.outcome)); got != tt.want {
				t.Errorf("ToolCalls{%s,%s} = %v, want %v", tt.tool, tt.outcome, got, tt.want)
			}
		}
		if n := testutil.CollectAndCount(m.ToolCallDuration); n != 1 {
			t.Errorf("ToolCallDuration has %d series, want 1 (server stdio)", n)
		}
	})
}

// TestStdioEnvironment: a stdio server's process gets PATH, HOME, USER,
// LANG and TMPDIR from sampled's environment, and its configured env:
// nothing else, so neither the provider key (SAMPLING_API_KEY) nor an API
// key variable (keyEnv) reaches it. (Not parallel: it sets variables of
// the test process.)
func TestStdioEnvironment(t *testing.T) {
	const secret = "sk-secret-of-sampled"
	t.Setenv("SAMPLING_API_KEY", secret)
	t.Setenv("SAMPLED_KEY_ALICE", secret)
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TMPDIR", t.TempDir())
	r := start(t, Options{
		Servers:    map[string]ServerOptions{"env": {Command: mcpServer(t), Env: map[string]string{"GREETING": "bonjour"}}},
		DisableStd: true,
	})
	waitConnected(t, r, "env")
	got := strings.Split(sampler.TextOf(mustCall(t, r, "env__getenv", map[string]any{"text": ""}).Content), "\n")
	want := []string{"GREETING=bonjour"}
	for _, k := range []string{"HOME", "LANG", "PATH", "TMPDIR", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			want = append(want, k+"="+v)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the child's environment (-want +got):\n%s", diff)
	}
	for _, kv := range got {
		if strings.Contains(kv, secret) {
			t.Errorf("the child sees the secret: %s", kv)
		}
	}
}
