package app

import (
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/host"
	"github.com/sampled/sampled/internal/tools"
)

// toolServers are the configured MCP servers as the tool registry takes
// them.
func toolServers(servers map[string]config.MCPServer) map[string]tools.ServerOptions {
	out := make(map[string]tools.ServerOptions, len(servers))
	for name, s := range servers {
		out[name] = tools.ServerOptions{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers,
			ProtocolVersion: s.ProtocolVersion, Required: s.Required}
	}
	return out
}

// samplingPolicies are the configured MCP servers' sampling policies as the
// host takes them.
func samplingPolicies(servers map[string]config.MCPServer) map[string]host.Policy {
	out := make(map[string]host.Policy, len(servers))
	for name, s := range servers {
		p := s.Sampling
		out[name] = host.Policy{Disabled: !p.On(), Models: p.Models, MaxTokens: p.MaxTokens, RequestsPerMinute: p.RequestsPerMinute,
			Loop: p.Loop.Allowed, LoopTools: p.Loop.Tools, LoopMaxIterations: p.Loop.MaxIterations}
	}
	return out
}
