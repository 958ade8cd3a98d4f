// Package handlers is the HTTP layer of sampled: routes, request decoding,
// RFC 9457 problems and the mapping of domain errors to statuses.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
)

// Config holds the dependencies of the HTTP layer. Zero values mean the
// documented defaults.
type Config struct {
	Sampler *sampler.Service
	// Metrics nil records nothing.
	Metrics *metrics.Metrics
	// Gatherer serves GET /metrics; nil serves an empty registry.
	Gatherer prometheus.Gatherer
	// Logger nil discards logs.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyTimeout bounds the reading of a request body; 0 means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Ready reports whether dependencies are reachable; nil means ready.
	Ready func(ctx context.Context) error
	// Loops, Runs and Tools serve the tool-loop routes.
	Loops Loops
	Runs  Runs
	Tools Tools
	// Heartbeat is the interval of SSE comments on idle streams, and how
	// long a stream's write may wait for its client; 0 means 15 s.
	Heartbeat time.Duration
	// Access checks API keys and limits; nil admits every request without
	// limits. MetricsNeedKey puts GET /metrics behind the keys.
	Access         *access.Guard
	MetricsNeedKey bool
	// MCP serves /mcp (sampled as an MCP server); nil answers 404.
	MCP http.Handler
}

// Defaults of Config. DefaultBodyTimeout is shorter than the server's
// read timeout (a minute): a slow sender holds its connection no longer.
const (
	DefaultMaxBodyBytes = 4 << 20
	DefaultBodyTimeout  = 10 * time.Second
)

type server struct {
	sampler        *sampler.Service
	metrics        *metrics.Metrics
	metricsHandler http.Handler // serves /metrics from the Gatherer
	log            *slog.Logger
	maxBody        int64
	bodyTimeout    time.Duration
	ready          func(ctx context.Context) error
	loops          Loops
	runs           Runs
	tools          Tools
	heartbeat      time.Duration
	guard          *access.Guard
	metricsNeedKey bool
	mcp            http.Handler
	labels         map[string]string // route label by mux pattern, set by routes
}

// New returns the service's HTTP handler.
func New(c Config) http.Handler { return newServer(c).routes() }

func newServer(c Config) *server {
	s := &server{sampler: c.Sampler, metrics: c.Metrics, log: c.Logger, maxBody: c.MaxBodyBytes, bodyTimeout: c.BodyTimeout, ready: c.Ready,
		loops: c.Loops, runs: c.Runs, tools: c.Tools, heartbeat: c.Heartbeat, guard: c.Access, metricsNeedKey: c.MetricsNeedKey,
		mcp: c.MCP}
	if s.mcp == nil {
		s.mcp = http.HandlerFunc(s.notFound)
	}
	if s.heartbeat <= 0 {
		s.heartbeat = 15 * time.Second
	}
	if s.metrics == nil {
		s.metrics = metrics.New(nil)
	}
	if s.guard != nil {
		s.metrics.CountSamplingInFlight(s.guard.InFlight)
	}
	gatherer := c.Gatherer
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	s.metricsHandler = promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyTimeout
	}
	return s
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeProblem(w, r, Problem{Type: problemBase + "not-found", Title: "Not found", Status: http.StatusNotFound,
		Detail: "no route for " + r.URL.Path + "; GET /openapi.yaml lists the routes"})
}

// methodNotAllowed answers a method the path does not serve; allow lists
// those it does.
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	s.writeProblem(w, r, Problem{Type: problemBase + "method-not-allowed", Title: "Method not allowed",
		Status: http.StatusMethodNotAllowed, Detail: r.Method + " is not allowed on " + r.URL.Path})
}
