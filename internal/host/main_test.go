package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/host"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/offline"
	"github.com/sampled/sampled/internal/testing/mcpschema"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/testwait"
	"github.com/sampled/sampled/internal/tools"
)

// peerBin builds testdata/samplingpeer of internal/tools once per test
// binary; TestMain sets it.
var peerBin func() (string, error)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	peerBin = sync.OnceValues(func() (string, error) {
		bin := filepath.Join(dir, "samplingpeer")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/sampled/sampled/internal/tools/testdata/samplingpeer").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build samplingpeer: %v\n%s", err, out)
		}
		return bin, nil
	})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// waitTimeout bounds every wait of the tests; generous for -race on two
// cores.
const waitTimeout = 30 * time.Second

// peer returns the path of the go-sdk sampling peer.
func peer(t testing.TB) string {
	t.Helper()
	bin, err := peerBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// peerConfig is one peer: how to reach it, and its sampling policy.
type peerConfig struct {
	server tools.ServerOptions
	policy host.Policy
}

// stdioPeer configures the peer over stdio with a sampling policy.
func stdioPeer(t testing.TB, version string, policy host.Policy) peerConfig {
	return peerConfig{tools.ServerOptions{Command: peer(t), ProtocolVersion: version}, policy}
}

// httpPeer starts the peer over streamable HTTP, stopped at the test's
// end, and configures it.
func httpPeer(t testing.TB, version string, policy host.Policy) peerConfig {
	t.Helper()
	args := []string{"-http", "127.0.0.1:0"}
	if version == tools.ProtocolVersionMRTR {
		args = append(args, "-stateless")
	}
	cmd := exec.Command(peer(t), args...)
	return peerConfig{tools.ServerOptions{URL: mcptest.StartServing(t, cmd), ProtocolVersion: version}, policy}
}

// stack is sampled's MCP host side: a registry whose sampling requests a
// Host answers with a sampling service and a loop engine.
type stack struct {
	reg     *tools.Registry
	engine  *loop.Engine
	loops   *recorder
	store   *memory.Store
	metrics *metrics.Metrics
}

// recorder runs loops on an engine and records their ids.
type recorder struct {
	e   *loop.Engine
	mu  sync.Mutex
	ids []string
}

func (r *recorder) Run(ctx context.Context, spec loop.Spec, onIteration func(int)) (*loop.Snapshot, error) {
	snap, err := r.e.Run(ctx, spec, onIteration)
	if snap != nil {
		r.mu.Lock()
		r.ids = append(r.ids, snap.ID)
		r.mu.Unlock()
	}
	return snap, err
}

// stackOptions vary a stack; the zero value serves the offline provider,
// with no cap on requests in flight or on maxTokens.
type stackOptions struct {
	providers []sampler.Provider
	models    []sampler.Model
	inFlight  host.Admission
	maxTokens int
}

// newStack starts the stack with servers and waits until each is
// connected; the test closes it at its end.
func newStack(t testing.TB, servers map[string]peerConfig, so stackOptions) *stack {
	t.Helper()
	models := append([]sampler.Model{{Provider: "offline", Name: offline.ModelDefault}, {Provider: "offline", Name: offline.ModelFlaky}}, so.models...)
	cat := sampler.NewCatalog(models, "")
	svc, err := sampler.New(sampler.Options{Providers: append([]sampler.Provider{offline.New(nil)}, so.providers...), Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	opts, policies := map[string]tools.ServerOptions{}, map[string]host.Policy{}
	for name, p := range servers {
		opts[name], policies[name] = p.server, p.policy
	}
	reg, err := tools.New(tools.Options{Servers: opts, Metrics: m, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(memory.Options{})
	e := loop.New(loop.Options{Sampler: svc, Tools: reg, Store: store, Metrics: m})
	rec := &recorder{e: e}
	t.Cleanup(func() {
		e.Close()
		if err := reg.Close(); err != nil {
			t.Errorf("close the registry: %v", err)
		}
	})
	h := host.New(host.Options{Sampler: svc, Catalog: cat, Loops: rec, Tools: reg, Servers: policies, Metrics: m,
		InFlight: so.inFlight, MaxTokens: so.maxTokens})
	if err := reg.Start(ctx, h); err != nil {
		t.Fatal(err)
	}
	for name := range servers {
		testwait.Poll(t, 10*time.Millisecond, waitTimeout, name+" connected", func() bool {
			return slices.ContainsFunc(reg.Status(), func(st tools.ServerStatus) bool { return st.Name == name && st.Connected })
		})
	}
	return &stack{reg: reg, engine: e, loops: rec, store: store, metrics: m}
}

// sampleOut is the structuredContent of the peer's sampling tools.
type sampleOut struct {
	Result          json.RawMessage `json:"result"`
	Code            int64           `json:"code"`
	Message         string          `json:"message"`
	ProtocolVersion string          `json:"protocolVersion"`
	Sampling        json.RawMessage `json:"sampling"`
}

// call calls a tool of the stack and decodes its structuredContent.
func (s *stack) call(t testing.TB, ctx context.Context, tool string, args any) sampleOut {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.reg.Call(ctx, tool, b)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var out sampleOut
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
		t.Fatalf("%s: structuredContent %s: %v (content %s)", tool, res.StructuredContent, err, sampler.TextOf(res.Content))
	}
	if res.IsError != (out.Code != 0) {
		t.Fatalf("%s: isError %v with %s", tool, res.IsError, res.StructuredContent)
	}
	return out
}

// sample has the peer send params as a sampling request, pushed or as an
// "input required" result.
func (s *stack) sample(t testing.TB, server, mode string, params string) sampleOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return s.call(t, ctx, server+"__sample", map[string]any{"params": json.RawMessage(params), "mode": mode})
}

// schemas are the official MCP schemas, loaded once.
var schemas = sync.OnceValues(func() (map[string]*mcpschema.Validator, error) {
	out := map[string]*mcpschema.Validator{}
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		val, err := mcpschema.Load(filepath.Join("..", "..", "reference", "mcp", "schema-"+v+".json"))
		if err != nil {
			return nil, err
		}
		out[v] = val
	}
	return out, nil
})

// checkResult validates a CreateMessageResult against the schema of the
// session's protocol version and decodes it.
func checkResult(t testing.TB, out sampleOut) sampler.CreateMessageResult {
	t.Helper()
	if out.Code != 0 {
		t.Fatalf("sampling failed: %d %s", out.Code, out.Message)
	}
	vs, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := vs[out.ProtocolVersion]
	if !ok {
		t.Fatalf("no schema for protocol version %q", out.ProtocolVersion)
	}
	if err := v.Validate("CreateMessageResult", out.Result); err != nil {
		t.Errorf("%s: %v", out.Result, err)
	}
	var res sampler.CreateMessageResult
	if err := json.Unmarshal(out.Result, &res); err != nil {
		t.Fatalf("decode %s: %v", out.Result, err)
	}
	return res
}

// progressSeen asks the peer which progress messages it received for
// token. The peer reads the notifications before this later request.
func (s *stack) progressSeen(t testing.TB, server, token string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	b, _ := json.Marshal(map[string]string{"token": token})
	res, err := s.reg.Call(ctx, server+"__progress_seen", b)
	if err != nil {
		t.Fatal(err)
	}
	var seen struct{ Messages []string }
	if err := json.Unmarshal(res.StructuredContent, &seen); err != nil {
		t.Fatal(err)
	}
	return seen.Messages
}
