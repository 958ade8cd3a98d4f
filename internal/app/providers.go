package app

import (
	"time"

	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/anthropic"
	"github.com/sampled/sampled/internal/sampler/offline"
	"github.com/sampled/sampled/internal/sampler/ollama"
	"github.com/sampled/sampled/internal/sampler/openai"
)

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
