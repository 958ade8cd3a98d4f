package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryErrorNamesTheFile: with SAMPLED_CONFIG set, every error Load
// returns names the file, whatever part of the configuration is wrong: the
// file itself, a secret it points at, or a variable that overrides it.
func TestEveryErrorNamesTheFile(t *testing.T) {
	local := "providers:\n  - name: local\n    type: ollama\n    models: [{name: m}]\n"
	server := local + "mcpServers:\n  git:\n    command: x\n"
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       string // what the message names besides the file
	}{
		{name: "not YAML", yaml: "providers: [", want: "did not find expected"},
		{name: "unknown field", yaml: "colour: red\n", want: "field colour not found"},
		{name: "bad duration", yaml: "callTimeout: soon\n", want: "want a duration"},
		{name: "provider without name", yaml: "providers:\n  - type: ollama\n    models: [{name: m}]\n", want: "providers[0].name: required"},
		{name: "provider name with a slash", yaml: "providers:\n  - name: a/b\n    type: ollama\n    models: [{name: m}]\n", want: "providers[0].name"},
		{name: "provider name twice", yaml: local + "  - name: local\n    type: ollama\n    models: [{name: m}]\n", want: "providers[1].name"},
		{name: "provider type", yaml: "providers:\n  - name: x\n    type: gemini\n    models: [{name: m}]\n", want: "providers[0].type"},
		{name: "offline under another name", yaml: "providers:\n  - name: x\n    type: offline\n    models: [{name: m}]\n", want: "providers[0]: the offline provider"},
		{name: "two key sources", yaml: "providers:\n  - name: o\n    type: openai\n    apiKeyEnv: K\n    apiKeyFile: /k\n    models: [{name: m}]\n", want: "providers[0]: give apiKeyEnv or apiKeyFile"},
		{name: "endpoint", yaml: "providers:\n  - name: o\n    type: ollama\n    endpoint: localhost\n    models: [{name: m}]\n", want: "providers[0].endpoint"},
		{name: "no models", yaml: "providers:\n  - name: o\n    type: ollama\n", want: "providers[0].models"},
		{name: "model without name", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{cost: 1}]\n", want: "providers[0].models[0].name"},
		{name: "model twice", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m}, {name: m}]\n", want: "providers[0].models[1].name"},
		{name: "score", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m, speed: 2}]\n", want: "providers[0].models[0].speed"},
		{name: "negative input price", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m, price: {input: -1, output: 1}}]\n", want: "providers[0].models[0].price.input: want a non-negative"},
		{name: "negative output price", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m}, {name: n, price: {output: -0.5}}]\n", want: "providers[0].models[1].price.output"},
		{name: "negative cached price", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m, price: {cachedInput: -1}}]\n", want: "providers[0].models[0].price.cachedInput"},
		{name: "price not a number", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m, price: {input: cheap}}]\n", want: "cheap"},
		{name: "alias with a slash", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m, aliases: [a/b]}]\n", want: "providers[0].models[0].aliases[0]"},
		{name: "alias twice", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m, aliases: [a]}, {name: n, aliases: [a]}]\n", want: "providers[0].models[1].aliases[0]"},
		{name: "fallback", yaml: "providers:\n  - name: o\n    type: ollama\n    models: [{name: m, fallbacks: [x/y]}]\n", want: "providers[0].models[0].fallbacks[0]"},
		{name: "default", yaml: "default: nope\n", want: "default"},
		{name: "server without a name", yaml: "mcpServers:\n  '': {command: x}\n", want: "mcpServers: a server needs a name"},
		{name: "server without command or url", yaml: "mcpServers:\n  git: {}\n", want: "mcpServers.git"},
		{name: "server with both", yaml: "mcpServers:\n  git: {command: x, url: 'http://h/mcp'}\n", want: "mcpServers.git"},
		{name: "server protocol version", yaml: server + "    protocolVersion: '2024-11-05'\n", want: "mcpServers.git.protocolVersion"},
		{name: "sampling model", yaml: server + "    sampling: {models: [nope]}\n", want: "mcpServers.git.sampling.models[0]"},
		{name: "sampling cap", yaml: server + "    sampling: {maxTokens: -1}\n", want: "mcpServers.git.sampling.maxTokens"},
		{name: "sampling rate", yaml: server + "    sampling: {requestsPerMinute: -1}\n", want: "mcpServers.git.sampling.requestsPerMinute"},
		{name: "sampling loop iterations", yaml: server + "    sampling: {loop: {maxIterations: 101}}\n", want: "mcpServers.git.sampling.loop.maxIterations"},
		{name: "sampling loop without tools", yaml: server + "    sampling: {loop: {allowed: true}}\n", want: "mcpServers.git.sampling.loop.tools"},
		{name: "sampling loop pattern", yaml: server + "    sampling: {loop: {allowed: true, tools: ['[']}}\n", want: "mcpServers.git.sampling.loop.tools[0]"},
		{name: "api key without name", yaml: "apiKeys: [{keyEnv: K}]\n", want: "apiKeys[0].name"},
		{name: "api key name twice", yaml: "apiKeys: [{name: a, keyEnv: K}, {name: a, keyEnv: K}]\n", want: "apiKeys[1].name"},
		{name: "api key named anonymous", yaml: "apiKeys: [{name: anonymous, keyEnv: K}]\n", want: "apiKeys[0].name"},
		{name: "api key without key", yaml: "apiKeys: [{name: a}]\n", want: "apiKeys[0]: give one of"},
		{name: "api key limit", yaml: "apiKeys: [{name: a, keyEnv: K, requestsPerMinute: -1}]\n", want: "apiKeys[0]: limits"},
		{name: "api key hash", yaml: "apiKeys: [{name: a, hash: sha256:ab}]\n", want: "apiKeys[0].hash"},
		{name: "limits", yaml: "limits: {concurrentLoops: -1}\n", want: "limits"},
		{name: "redis lease", yaml: "redis: {url: 'redis://db', leaseTTL: 1ms}\n", want: "redis.leaseTTL"},
		{name: "redis url scheme", yaml: "redis: {url: 'http://db'}\n", want: "redis.url"},
		{name: "redis url", yaml: "redis: {url: \"redis://db:port\\x7f\"}\n", want: "redis.url"},
		{name: "redis url from the environment", env: map[string]string{"SAMPLED_REDIS_URL": "http://db"}, want: "SAMPLED_REDIS_URL"},
		{name: "mcp endpoint sampling", yaml: "mcpServer: {sampling: always}\n", want: "mcpServer.sampling"},
		{name: "mcp endpoint sampling from the environment", env: map[string]string{"SAMPLED_MCP_SAMPLING": "always"}, want: "SAMPLED_MCP_SAMPLING"},
		{name: "mcp endpoint origin", yaml: "mcpServer: {allowedOrigins: [nope]}\n", want: "mcpServer.allowedOrigins[0]"},
		{name: "provider key variable empty", yaml: "providers:\n  - name: o\n    type: openai\n    apiKeyEnv: EMPTY\n    models: [{name: m}]\n", want: "providers[0].apiKeyEnv"},
		{name: "provider key file missing", yaml: "providers:\n  - name: o\n    type: openai\n    apiKeyFile: /nonexistent/key\n    models: [{name: m}]\n", want: "providers[0].apiKeyFile"},
		{name: "provider key file empty", yaml: "providers:\n  - name: o\n    type: openai\n    apiKeyFile: EMPTYFILE\n    models: [{name: m}]\n", want: "providers[0].apiKeyFile"},
		{name: "provider without key", yaml: "providers:\n  - name: a\n    type: anthropic\n    models: [{name: m}]\n", want: "providers[0]: anthropic needs an API key"},
		{name: "api key variable empty", yaml: "apiKeys: [{name: a, keyEnv: EMPTY}]\n", want: "apiKeys[0].keyEnv"},
		{name: "api key file missing", yaml: "apiKeys: [{name: a, keyFile: /nonexistent/key}]\n", want: "apiKeys[0].keyFile"},
		{name: "providers in the file and the environment", yaml: local, env: map[string]string{"SAMPLING_PROVIDER": "ollama"}, want: "SAMPLING_PROVIDER"},
		{name: "provider of the environment", env: map[string]string{"SAMPLING_PROVIDER": "gemini"}, want: "SAMPLING_PROVIDER"},
		{name: "call timeout", env: map[string]string{"SAMPLED_CALL_TIMEOUT": "soon"}, want: "SAMPLED_CALL_TIMEOUT"},
		{name: "request timeout", env: map[string]string{"SAMPLED_REQUEST_TIMEOUT": "-1s"}, want: "SAMPLED_REQUEST_TIMEOUT"},
		{name: "body size", env: map[string]string{"SAMPLED_MAX_BODY_BYTES": "0"}, want: "SAMPLED_MAX_BODY_BYTES"},
		{name: "max tokens", env: map[string]string{"SAMPLED_MAX_TOKENS": "many"}, want: "SAMPLED_MAX_TOKENS"},
		{name: "log format", env: map[string]string{"SAMPLED_LOG_FORMAT": "xml"}, want: "SAMPLED_LOG_FORMAT"},
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-key")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad-"+strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(tt.yaml, "EMPTYFILE", empty)), 0o600); err != nil {
				t.Fatal(err)
			}
			e := map[string]string{"SAMPLED_CONFIG": path, "K": "k"}
			for k, v := range tt.env {
				e[k] = v
			}
			_, err := Load(env(e), nil)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("case %d: err = %v, want one naming %s and %q", i, err, path, tt.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(dir, "missing.yaml")
		_, err := Load(env(map[string]string{"SAMPLED_CONFIG": path}), nil)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "SAMPLED_CONFIG") {
			t.Errorf("err = %v, want one naming %s and SAMPLED_CONFIG", err, path)
		}
	})
}
