// Package app assembles sampled from its parts: configuration, providers,
// the sampling service, MCP tools, the run store, the loop engine and the
// HTTP handler. cmd/server serves it; bench measures it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/handlers"
	"github.com/sampled/sampled/internal/host"
	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/mcpserver"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// Options configure an App. Zero values mean the documented defaults.
type Options struct {
	// Config nil means the configuration of an empty environment: the
	// offline provider alone.
	Config *config.Config
	// Logger nil discards logs.
	Logger *slog.Logger
	// Registry nil means a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Runs, if set, is the store of loop runs and their event logs, in
	// place of the one the configuration names; the App closes it. nil
	// means the configured store.
	Runs runs.Store
}

// App is the assembled service.
type App struct {
	// Handler serves every route.
	Handler http.Handler
	// Catalog lists the configured models.
	Catalog *sampler.Catalog

	engine *loop.Engine
	store  runs.Store
	mcp    *mcpserver.Server
	tools  *tools.Registry
	// release frees, in order, what New opened: MCP connections, the run
	// store and Redis clients; Close calls them after the loops drained.
	release []func() error
}

// New reads the configuration and builds the service. ctx bounds the MCP
// connections made at start-up.
func New(ctx context.Context, o Options) (_ *App, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m := metrics.New(reg)
	pc := o.Config
	if pc == nil {
		if pc, err = config.Load(func(string) string { return "" }, nil); err != nil {
			return nil, err
		}
	}
	// One cache of compiled schemas: the offline provider validates its
	// answers with the very schemas the service compiled.
	schemas := sampler.NewSchemaCache(0)
	providers, cat := buildProviders(pc, schemas)
	pr := prices(pc)
	for i, p := range providers {
		providers[i] = meter(p, cat, m, pr)
	}
	sopts := sampler.Options{
		Providers:        providers,
		Catalog:          cat,
		Observer:         m,
		Schemas:          schemas,
		DefaultMaxTokens: pc.Server.DefaultMaxTokens,
		CallTimeout:      time.Duration(pc.CallTimeout),
		RequestTimeout:   time.Duration(pc.RequestTimeout),
		IdleTimeout:      time.Duration(pc.StreamIdleTimeout),
	}
	svc, err := sampler.New(sopts)
	if err != nil {
		return nil, err
	}
	a := &App{Catalog: cat}
	defer func() { // undo what was opened
		if err != nil {
			_ = a.free()
		}
	}()
	// The registry connects once the host that answers its servers'
	// sampling requests exists: the host runs loops on the engine, which
	// calls the registry's tools.
	if a.tools, err = tools.New(tools.Options{Servers: toolServers(pc.MCPServers), Metrics: m, Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	a.release = append(a.release, a.tools.Close)
	// One set of Redis collectors, for the run store's and the limits'
	// operations; registered only when Redis is configured.
	var redisMetrics *metrics.Redis
	if pc.Redis.URL != "" {
		redisMetrics = metrics.NewRedis(reg)
	}
	guard, err := a.newGuard(pc, m, redisMetrics, o.Logger)
	if err != nil {
		return nil, err
	}
	storeReady, err := a.openStore(ctx, o.Runs, pc.Redis, pc.Limits.StoreBytes, redisMetrics, o.Logger)
	if err != nil {
		return nil, err
	}
	a.engine = loop.New(loop.Options{Sampler: svc, Tools: a.tools, Store: a.store, Access: guard, Metrics: m, Logger: o.Logger,
		MaxToolResultBytes: pc.Limits.ToolResultBytes, MaxRunBytes: pc.Limits.RunBytes})
	samplingHost := host.New(host.Options{Sampler: svc, Catalog: cat, Loops: a.engine, Tools: a.tools,
		Servers: samplingPolicies(pc.MCPServers), InFlight: guard, MaxTokens: svc.DefaultMaxTokens(), Metrics: m, Logger: o.Logger})
	if err = a.tools.Start(ctx, samplingHost); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	if a.mcp, err = mcpserver.New(mcpserver.Options{Service: svc, Client: sopts, Loops: a.engine,
		Access: guard, Mode: mcpserver.Mode(pc.MCPEndpoint.Sampling),
		AllowedOrigins: pc.MCPEndpoint.AllowedOrigins, Metrics: m, Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("mcp server: %w", err)
	}
	a.Handler = handlers.New(handlers.Config{
		Sampler:      svc,
		Metrics:      m,
		Gatherer:     reg,
		Logger:       o.Logger,
		MaxBodyBytes: pc.Server.MaxBodyBytes,
		Loops:        a.engine,
		Runs:         a.store,
		Tools:        a.tools,
		Ready: func(ctx context.Context) error {
			if err := storeReady(ctx); err != nil {
				return err
			}
			return a.tools.Ready()
		},
		Access:         guard,
		MetricsNeedKey: pc.MetricsNeedKey,
		MCP:            a.mcp,
	})
	return a, nil
}

// Drain cancels the running loops and waits until each has recorded its
// terminal event, which every event stream of the loop then writes before
// it ends; then it ends the MCP sessions and their streams, and closes the
// run store, which ends the other streams. An
// http.Server's Shutdown, which waits for those streams, calls it through
// RegisterOnShutdown. It is safe to call more than once and concurrently.
func (a *App) Drain() {
	a.engine.Close()
	a.mcp.Close()
	_ = a.store.Close()
}

// Close drains and disconnects from the MCP servers and the run store's
// backend.
func (a *App) Close() error {
	a.Drain()
	return a.free()
}

// free calls what release holds.
func (a *App) free() (err error) {
	for _, f := range a.release {
		err = errors.Join(err, f())
	}
	return err
}
