package app

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/host"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/anthropic"
	"github.com/sampled/sampled/internal/sampler/offline"
	"github.com/sampled/sampled/internal/sampler/ollama"
	"github.com/sampled/sampled/internal/sampler/openai"
	"github.com/sampled/sampled/internal/tools"
)

// This file turns the configuration into the options of each part: only
// app reads config types.

// buildProviders creates the configured providers and the model catalog.
// config.Load checked the configuration.
func buildProviders(c *config.Config, schemas *sampler.SchemaCache) ([]sampler.Provider, *sampler.Catalog) {
	var (
		providers []sampler.Provider
		models    []sampler.Model
	)
	header := time.Duration(c.ResponseHeaderTimeout)
	for _, p := range c.Providers {
		switch p.Type {
		case config.TypeOffline:
			providers = append(providers, offline.New(schemas))
		case config.TypeOpenAI:
			providers = append(providers, openai.New(openai.Options{Name: p.Name, BaseURL: p.Endpoint, APIKey: p.APIKey.Reveal(), ResponseHeaderTimeout: header}))
		case config.TypeAnthropic:
			providers = append(providers, anthropic.New(anthropic.Options{Name: p.Name, BaseURL: p.Endpoint, APIKey: p.APIKey.Reveal(), ResponseHeaderTimeout: header}))
		case config.TypeOllama:
			providers = append(providers, ollama.New(ollama.Options{Name: p.Name, BaseURL: p.Endpoint, ResponseHeaderTimeout: header}))
		}
		for _, m := range p.Models {
			models = append(models, sampler.Model{Provider: p.Name, Name: m.Name, Aliases: m.Aliases, Fallbacks: m.Fallbacks,
				Cost: config.Score(m.Cost), Speed: config.Score(m.Speed), Intelligence: config.Score(m.Intelligence)})
		}
	}
	return providers, sampler.NewCatalog(models, c.Default)
}

// prices are the configured models' prices by model ID; unpriced models
// are absent.
func prices(c *config.Config) map[string]*config.Price {
	out := map[string]*config.Price{}
	for _, p := range c.Providers {
		for _, m := range p.Models {
			if m.Price != nil {
				out[p.Name+"/"+m.Name] = m.Price
			}
		}
	}
	return out
}

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
		out[name] = host.Policy{Disabled: !p.On(), Models: p.Models, MaxTokens: p.MaxTokens, RequestsPerMinute: p.PerMinute(),
			Loop: p.Loop.Allowed, LoopTools: p.Loop.Tools, LoopMaxIterations: p.Loop.MaxIterations}
	}
	return out
}

// newGuard builds the access guard of the configured API keys and limits,
// and creates their metric series. With keys and a Redis URL, the keys'
// limits, budgets included, are shared through Redis (openLimits).
func (a *App) newGuard(c *config.Config, m *metrics.Metrics, rm *metrics.Redis, log *slog.Logger) (*access.Guard, error) {
	lim := c.Limits.WithDefaults()
	o := access.Options{InFlightSamples: lim.InFlightSamples, Logger: log,
		Unchecked: func(limit string) { m.LimitUnchecked.WithLabelValues(limit).Inc() }}
	if len(c.APIKeys) > 0 {
		o.RequestsPerMinute, o.ConcurrentLoops = lim.RequestsPerMinute, lim.ConcurrentLoops
		o.TokensPerMinute, o.USDPerDay, o.USDPerMonth = lim.TokensPerMinute, lim.USDPerDay, lim.USDPerMonth
	}
	for _, k := range c.APIKeys {
		key := access.Key{Name: k.Name, RequestsPerMinute: k.RequestsPerMinute, ConcurrentLoops: k.ConcurrentLoops,
			TokensPerMinute: k.TokensPerMinute, USDPerDay: k.USDPerDay, USDPerMonth: k.USDPerMonth}
		if k.Hash != "" {
			d, err := access.ParseDigest(k.Hash)
			if err != nil {
				return nil, fmt.Errorf("apiKeys: %s: %w", k.Name, err)
			}
			key.Digest = d
		} else {
			key.Digest = access.HashKey(k.Key.Reveal())
		}
		o.Keys = append(o.Keys, key)
	}
	if len(o.Keys) > 0 && c.Redis.URL != "" { // without keys there are no per-key limits to share
		var err error
		if o.Shared, err = a.openLimits(c.Redis, rm, log); err != nil {
			return nil, err
		}
		// The keys' budgets are kept in the same Redis.
		o.Budgets, _ = o.Shared.(access.SharedBudgets)
	}
	g, err := access.New(o)
	if err != nil {
		return nil, err
	}
	names := g.Names()
	if len(names) == 0 {
		names = []string{metrics.AnonymousKey}
	}
	m.AccessKeys(names)
	m.Spend(names, a.Catalog.Models())
	return g, nil
}
