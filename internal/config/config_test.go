package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/tools"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if v, ok := m[p]; ok {
			return []byte(v), nil
		}
		return nil, fs.ErrNotExist
	}
}

func ids(c *Config) []string {
	var out []string
	for _, p := range c.Providers {
		for _, m := range p.Models {
			out = append(out, p.Name+"/"+m.Name)
		}
	}
	return out
}

func TestTimeoutsFromEnv(t *testing.T) {
	c, err := Load(env(map[string]string{"SAMPLED_CALL_TIMEOUT": "45s", "SAMPLED_REQUEST_TIMEOUT": "2m", "SAMPLED_STREAM_IDLE_TIMEOUT": "20s"}), nil)
	if err != nil || time.Duration(c.CallTimeout) != 45*time.Second || time.Duration(c.RequestTimeout) != 2*time.Minute || time.Duration(c.StreamIdleTimeout) != 20*time.Second {
		t.Fatalf("CallTimeout, RequestTimeout, StreamIdleTimeout = %v, %v, %v, %v; want 45s, 2m, 20s", time.Duration(c.CallTimeout), time.Duration(c.RequestTimeout), time.Duration(c.StreamIdleTimeout), err)
	}
}

// TestFileAndEnvProviders: a file without providers takes the provider of
// the SAMPLING_* variables; a file with providers and the variables too is
// refused, so that a real provider asked for is never served offline.
func TestFileAndEnvProviders(t *testing.T) {
	mcpOnly := "mcpServers:\n  git: {command: git-mcp}\n"
	c, err := Load(env(map[string]string{"SAMPLED_CONFIG": "c.yaml", "SAMPLING_PROVIDER": "openai", "SAMPLING_API_KEY": "sk-1"}),
		files(map[string]string{"c.yaml": mcpOnly}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"openai/gpt-4o-mini", "offline/default", "offline/flaky", "offline/broken", "offline/slow"}, ids(c)); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	if c.Default != "openai/gpt-4o-mini" || len(c.MCPServers) != 1 {
		t.Errorf("default %q, %d MCP servers; want openai/gpt-4o-mini and the file's server", c.Default, len(c.MCPServers))
	}
	_, err = Load(env(map[string]string{"SAMPLED_CONFIG": "c.yaml", "SAMPLING_PROVIDER": "openai", "SAMPLING_API_KEY": "sk-1"}),
		files(map[string]string{"c.yaml": "providers:\n  - name: local\n    type: ollama\n    models: [{name: m}]\n"}))
	if err == nil || !strings.Contains(err.Error(), "both name providers") {
		t.Errorf("err = %v, want a refusal naming both", err)
	}
}

func TestServerFromEnv(t *testing.T) {
	c, err := Load(env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Server{Addr: "127.0.0.1:8080", LogFormat: "json"}, c.Server); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	c, err = Load(env(map[string]string{"SAMPLED_ADDR": "127.0.0.1:9", "SAMPLED_LOG_FORMAT": "text",
		"SAMPLED_MAX_BODY_BYTES": "1000", "SAMPLED_MAX_TOKENS": "77"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Server{Addr: "127.0.0.1:9", LogFormat: "text", MaxBodyBytes: 1000, DefaultMaxTokens: 77}
	if diff := cmp.Diff(want, c.Server); diff != "" {
		t.Errorf("from env (-want +got):\n%s", diff)
	}
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		wantIDs     []string
		wantDefault string
	}{
		{name: "nothing: offline", env: nil, wantIDs: []string{"offline/default", "offline/flaky", "offline/broken", "offline/slow"}},
		{name: "offline flaky default", env: map[string]string{"SAMPLING_MODEL": "flaky"}, wantIDs: []string{"offline/default", "offline/flaky", "offline/broken", "offline/slow"}, wantDefault: "offline/flaky"},
		{name: "openai", env: map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_API_KEY": "sk-1", "SAMPLING_MODEL": "gpt-4.1"},
			wantIDs: []string{"openai/gpt-4.1", "offline/default", "offline/flaky", "offline/broken", "offline/slow"}, wantDefault: "openai/gpt-4.1"},
		{name: "ollama without key", env: map[string]string{"SAMPLING_PROVIDER": "ollama", "SAMPLING_ENDPOINT": "http://127.0.0.1:11434"},
			wantIDs: []string{"ollama/llama3.2", "offline/default", "offline/flaky", "offline/broken", "offline/slow"}, wantDefault: "ollama/llama3.2"},
		{name: "openai-compatible server without key", env: map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": "http://127.0.0.1:8000/v1", "SAMPLING_MODEL": "qwen"},
			wantIDs: []string{"openai/qwen", "offline/default", "offline/flaky", "offline/broken", "offline/slow"}, wantDefault: "openai/qwen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(tt.env), files(nil))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantIDs, ids(c)); diff != "" {
				t.Errorf("models (-want +got):\n%s", diff)
			}
			if c.Default != tt.wantDefault {
				t.Errorf("default %q, want %q", c.Default, tt.wantDefault)
			}
		})
	}
}

const goodYAML = `
default: smart
callTimeout: 90s
providers:
  - name: openai
    type: openai
    apiKeyEnv: OPENAI_API_KEY
    models:
      - name: gpt-4o-mini
        aliases: [fast]
        cost: 0.9
        speed: 0.9
        intelligence: 0.5
  - name: claude
    type: anthropic
    apiKeyFile: /run/secrets/anthropic
    models:
      - name: claude-sonnet-4-5
        aliases: [smart]
        intelligence: 0.95
        fallbacks: [fast]
  - name: local
    type: ollama
    endpoint: http://127.0.0.1:11434
    models:
      - name: llama3.2
mcpServers:
  git:
    command: mcp-server-git
    args: ["--repository", "."]
    required: true
    sampling:
      models: [fast, offline/default]
      maxTokens: 2000
      requestsPerMinute: 30
      loop:
        allowed: true
        tools: ["std__*", "remote__search"]
        maxIterations: 5
  remote:
    url: http://127.0.0.1:9000/mcp
    protocolVersion: "2026-07-28"
    sampling: {enabled: false}
`

func TestFile(t *testing.T) {
	c, err := Load(env(map[string]string{"SAMPLED_CONFIG": "/etc/sampled.yaml", "OPENAI_API_KEY": "sk-openai-secret"}),
		files(map[string]string{"/etc/sampled.yaml": goodYAML, "/run/secrets/anthropic": "sk-ant-secret\n"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"openai/gpt-4o-mini", "claude/claude-sonnet-4-5", "local/llama3.2", "offline/default", "offline/flaky", "offline/broken", "offline/slow"}
	if diff := cmp.Diff(want, ids(c)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if c.Providers[0].APIKey.Reveal() != "sk-openai-secret" || c.Providers[1].APIKey.Reveal() != "sk-ant-secret" {
		t.Error("keys not resolved")
	}
	if len(c.MCPServers) != 2 || c.MCPServers["git"].Command != "mcp-server-git" || !c.MCPServers["git"].Required || c.MCPServers["remote"].Required {
		t.Errorf("mcpServers = %+v", c.MCPServers)
	}
	wantSampling := Sampling{Models: []string{"fast", "offline/default"}, MaxTokens: 2000, RequestsPerMinute: 30,
		Loop: SamplingLoop{Allowed: true, Tools: tools.Patterns{"std__*", "remote__search"}, MaxIterations: 5}}
	if diff := cmp.Diff(wantSampling, c.MCPServers["git"].Sampling); diff != "" {
		t.Errorf("git's sampling (-want +got):\n%s", diff)
	}
	if !c.MCPServers["git"].Sampling.On() || c.MCPServers["remote"].Sampling.On() {
		t.Error("sampling is on unless disabled")
	}
	if c.MCPServers["remote"].ProtocolVersion != "2026-07-28" {
		t.Errorf("remote's protocolVersion = %q", c.MCPServers["remote"].ProtocolVersion)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, c); strings.Contains(s, "sk-openai-secret") || strings.Contains(s, "sk-ant-secret") {
			t.Errorf("%s prints a key: %s", f, s)
		}
	}
}

func TestBadConfigNamesTheField(t *testing.T) {
	base := func(s string) string { return "providers:\n  - name: local\n    type: ollama\n    models:\n" + s }
	tests := []struct {
		name, yaml, want string
		env              map[string]string
	}{
		{name: "unknown field", yaml: "providers:\n  - name: x\n    typ: openai\n", want: "field typ not found"},
		{name: "bad type", yaml: "providers:\n  - name: x\n    type: gemini\n    models: [{name: m}]\n", want: "providers[0].type"},
		{name: "no models", yaml: "providers:\n  - name: x\n    type: ollama\n", want: "providers[0].models"},
		{name: "score out of range", yaml: base("      - name: m\n        cost: 3\n"), want: "providers[0].models[0].cost"},
		{name: "unknown fallback", yaml: base("      - name: m\n        fallbacks: [nope/x]\n"), want: "providers[0].models[0].fallbacks[0]"},
		{name: "unknown default", yaml: "default: nope\n" + base("      - name: m\n"), want: "default"},
		{name: "duplicate model", yaml: base("      - name: m\n      - name: m\n"), want: "providers[0].models[1].name"},
		{name: "model without name", yaml: base("      - cost: 1\n"), want: "providers[0].models[0].name: required"},
		{name: "duplicate alias", yaml: base("      - name: m\n        aliases: [a]\n      - name: n\n        aliases: [a]\n"), want: "providers[0].models[1].aliases[0]"},
		{name: "bad duration", yaml: "callTimeout: soon\n" + base("      - name: m\n"), want: "duration"},
		{name: "missing key env", yaml: "providers:\n  - name: o\n    type: openai\n    apiKeyEnv: NOPE\n    models: [{name: m}]\n", want: "providers[0].apiKeyEnv"},
		{name: "anthropic without key", yaml: "providers:\n  - name: a\n    type: anthropic\n    models: [{name: m}]\n", want: "providers[0]: anthropic needs an API key"},
		{name: "bad endpoint", yaml: "providers:\n  - name: o\n    type: ollama\n    endpoint: localhost:11434\n    models: [{name: m}]\n", want: "providers[0].endpoint"},
		{name: "mcp server without command or url", yaml: base("      - name: m\n") + "mcpServers:\n  git: {}\n", want: "mcpServers.git"},
		{name: "mcp server with command and url", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: git-mcp, url: 'http://127.0.0.1:1/mcp'}\n", want: "mcpServers.git: give command or url, not both"},
		{name: "mcp server without a name", yaml: base("      - name: m\n") + "mcpServers:\n  '': {command: x}\n", want: "mcpServers: a server needs a name"},
		{name: "mcp server with an unknown protocol version", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, protocolVersion: '2025-06-18'}\n", want: "mcpServers.git.protocolVersion: want 2025-11-25 or 2026-07-28"},
		{name: "sampling with an unknown model", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, sampling: {models: [local/m, nope]}}\n", want: `mcpServers.git.sampling.models[1]: "nope" is not a configured model`},
		{name: "sampling with a negative cap", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, sampling: {maxTokens: -1}}\n", want: "mcpServers.git.sampling.maxTokens"},
		{name: "sampling with a negative rate", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, sampling: {requestsPerMinute: -5}}\n", want: "mcpServers.git.sampling.requestsPerMinute"},
		{name: "sampling loop without patterns", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, sampling: {loop: {allowed: true}}}\n", want: "mcpServers.git.sampling.loop.tools: give the tool patterns"},
		{name: "sampling loop with a bad pattern", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, sampling: {loop: {allowed: true, tools: ['std__[']}}}\n", want: "mcpServers.git.sampling.loop.tools[0]"},
		{name: "sampling loop with too many iterations", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, sampling: {loop: {maxIterations: 101}}}\n", want: "mcpServers.git.sampling.loop.maxIterations"},
		{name: "sampling with an unknown field", yaml: base("      - name: m\n") + "mcpServers:\n  git: {command: x, sampling: {enable: false}}\n", want: "field enable not found"},
		{name: "offline type under another name", yaml: "providers:\n  - name: local\n    type: offline\n    models: [{name: m}]\n", want: "providers[0]: the offline provider is named offline"},
		{name: "offline name for another type", yaml: "providers:\n  - name: offline\n    type: ollama\n    models: [{name: m}]\n", want: "providers[0]: the offline provider is named offline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"SAMPLED_CONFIG": "c.yaml"}
			_, err := Load(env(e), files(map[string]string{"c.yaml": tt.yaml}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
	t.Run("bad provider env", func(t *testing.T) {
		_, err := Load(env(map[string]string{"SAMPLING_PROVIDER": "gemini"}), nil)
		if err == nil || !strings.Contains(err.Error(), "SAMPLING_PROVIDER") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("bad call timeout", func(t *testing.T) {
		_, err := Load(env(map[string]string{"SAMPLED_CALL_TIMEOUT": "soon"}), nil)
		if err == nil || !strings.Contains(err.Error(), "SAMPLED_CALL_TIMEOUT") {
			t.Errorf("err = %v", err)
		}
	})
	for _, e := range []struct{ name, value string }{
		{"SAMPLED_MAX_BODY_BYTES", "-1"}, {"SAMPLED_MAX_TOKENS", "many"}, {"SAMPLED_LOG_FORMAT", "xml"},
	} {
		t.Run("bad "+e.name, func(t *testing.T) {
			_, err := Load(env(map[string]string{e.name: e.value}), nil)
			if err == nil || !strings.Contains(err.Error(), e.name) {
				t.Errorf("err = %v, want one naming %s", err, e.name)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(env(map[string]string{"SAMPLED_CONFIG": "nope.yaml"}), files(nil))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err = %v", err)
		}
	})
}

// TestExampleFile keeps deploy/sampled.example.yaml loadable.
func TestExampleFile(t *testing.T) {
	e := map[string]string{"SAMPLED_CONFIG": "../../deploy/sampled.example.yaml", "OPENAI_API_KEY": "k"}
	read := func(p string) ([]byte, error) {
		if p == "/run/secrets/anthropic_api_key" {
			return []byte("k2"), nil
		}
		return os.ReadFile(p)
	}
	c, err := Load(env(e), read)
	if err != nil {
		t.Fatal(err)
	}
	if c.Default != "fast" || len(c.Providers) != 5 || len(c.MCPServers) != 3 {
		t.Errorf("default %q, %d providers, %d MCP servers", c.Default, len(c.Providers), len(c.MCPServers))
	}
	// The prices: gpt-4o-mini's list price, gpt-4.1 unpriced, offline free.
	if p := c.Providers[0].Models[0].Price; p == nil || p.Input != 0.15 || p.Output != 0.60 {
		t.Errorf("gpt-4o-mini's price = %+v", p)
	}
	if p := c.Providers[0].Models[1].Price; p != nil {
		t.Errorf("gpt-4.1's price = %+v, want none", p)
	}
	if p := c.Providers[4].Models[0].Price; c.Providers[4].Name != "offline" || p == nil || *p != (Price{}) {
		t.Errorf("%s's first price = %+v, want zero", c.Providers[4].Name, p)
	}
}
