package handlers

import (
	"context"
	"net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/offline"
	"github.com/sampled/sampled/internal/tools"
)

// stack is the whole service running on loopback, built the way cmd/server
// builds it: the offline provider (plus extra providers), the std tools
// (plus extra MCP servers), the in-memory run store and the loop engine.
type stack struct {
	srv     *httptest.Server
	url     string
	metrics *metrics.Metrics
	reg     *prometheus.Registry
	tools   *tools.Registry
	runs    *countedRuns
	loops   *loop.Engine
}

// countedRuns is the stack's run store, counting the subscriptions the
// handlers hold: made and not closed yet.
type countedRuns struct {
	*memory.Store
	open atomic.Int64
}

// Subscribe subscribes on the memory store and counts the subscription
// until its first Close.
func (c *countedRuns) Subscribe(ctx context.Context, id string, after int64) (runs.Subscription, error) {
	sub, err := c.Store.Subscribe(ctx, id, after)
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	return &countedSub{Subscription: sub, close: sync.OnceFunc(func() { c.open.Add(-1) })}, nil
}

// Subscribers is how many subscriptions the handlers hold.
func (c *countedRuns) Subscribers() int { return int(c.open.Load()) }

type countedSub struct {
	runs.Subscription
	close func()
}

func (s *countedSub) Close() {
	s.Subscription.Close()
	s.close()
}

type stackOptions struct {
	maxBody   int64
	extra     []sampler.Provider
	servers   map[string]tools.ServerOptions
	heartbeat time.Duration
	loop      loop.Options
	runs      memory.Options
	upstream  retry.Upstream
	// writeTimeout and readTimeout, if set, are the server's WriteTimeout
	// and ReadTimeout.
	writeTimeout, readTimeout time.Duration
	cfg                       func(*Config)
	// listener, if set, wraps the server's listener (for measurements).
	listener func(net.Listener) net.Listener
	// http2 serves HTTP/2 over TLS; s.srv.Client() speaks it.
	http2 bool
}

func startStack(t testing.TB, maxBody int64, extra ...sampler.Provider) *stack {
	t.Helper()
	return startStackWith(t, stackOptions{maxBody: maxBody, extra: extra})
}

func startStackWith(t testing.TB, o stackOptions) *stack {
	t.Helper()
	s := &stack{reg: prometheus.NewRegistry()}
	s.metrics = metrics.New(s.reg)
	off := offline.New(nil)
	providers := []sampler.Provider{off}
	var models []sampler.Model
	for _, name := range off.Models() {
		models = append(models, sampler.Model{Provider: off.Name(), Name: name, Cost: 1, Speed: 1})
	}
	for _, p := range o.extra {
		providers = append(providers, p)
		models = append(models, sampler.Model{Provider: p.Name(), Name: "m"})
	}
	cat := sampler.NewCatalog(models, "offline/default")
	svc, err := sampler.New(sampler.Options{Providers: providers, Catalog: cat, Observer: s.metrics, Upstream: o.upstream})
	if err != nil {
		t.Fatal(err)
	}
	if s.tools, err = tools.New(tools.Options{Servers: o.servers, Metrics: s.metrics}); err != nil {
		t.Fatal(err)
	}
	if err := s.tools.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	s.runs = &countedRuns{Store: memory.New(o.runs)}
	lo := o.loop
	lo.Sampler, lo.Tools, lo.Store, lo.Metrics = svc, s.tools, s.runs, s.metrics
	s.loops = loop.New(lo)
	c := Config{Sampler: svc, Metrics: s.metrics, Gatherer: s.reg, MaxBodyBytes: o.maxBody, Loops: s.loops, Runs: s.runs,
		Tools: s.tools, Heartbeat: o.heartbeat, Ready: func(context.Context) error { return s.tools.Ready() }}
	if o.cfg != nil {
		o.cfg(&c)
	}
	s.srv = httptest.NewUnstartedServer(New(c))
	if o.listener != nil {
		s.srv.Listener = o.listener(s.srv.Listener)
	}
	s.srv.Config.WriteTimeout, s.srv.Config.ReadTimeout = o.writeTimeout, o.readTimeout
	if o.http2 {
		s.srv.EnableHTTP2 = true
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.url = s.srv.URL
	t.Cleanup(func() {
		// As at shutdown: the loops end with their terminal events, the
		// store's closing ends the other streams, and then the server has
		// no request left to wait for.
		s.loops.Close()
		_ = s.runs.Close()
		s.srv.Close()
		_ = s.tools.Close()
	})
	return s
}
