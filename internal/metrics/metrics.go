// Package metrics defines sampled's Prometheus collectors. They are created
// by New and registered on the Registerer it is given; nothing is global.
package metrics

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sampled/sampled/internal/sampler"
)

// Metrics holds every collector sampled exports, and records what the
// sampling service reports (it is its sampler.Observer). Label values are
// bounded by their callers: routes are the paths of the route table,
// models and providers are configured names or "other".
type Metrics struct {
	HTTPRequests        *prometheus.CounterVec   // route, method, code
	HTTPDuration        *prometheus.HistogramVec // route, method
	Samples             *prometheus.CounterVec   // endpoint, mode, provider, model, outcome
	ValidationFailures  *prometheus.CounterVec   // method, kind
	ValidationRetries   *prometheus.CounterVec   // method
	ValidationExhausted *prometheus.CounterVec   // method
	UpstreamRetries     *prometheus.CounterVec   // provider, reason
	UpstreamDuration    *prometheus.HistogramVec // provider, model, outcome
	Tokens              *prometheus.CounterVec   // provider, model, type
	TokenUsage          *prometheus.HistogramVec // provider, model, type
	FirstFragment       *prometheus.HistogramVec // provider, model
	StreamFragments     *prometheus.CounterVec   // provider, model
	GatewayOverhead     prometheus.Histogram

	LoopsTotal       *prometheus.CounterVec   // status
	LoopsActive      prometheus.Gauge         //
	LoopIterations   prometheus.Histogram     //
	ToolCalls        *prometheus.CounterVec   // tool, outcome
	ToolCallDuration *prometheus.HistogramVec // server
	SSESubscribers   prometheus.Gauge         //
	SSEEvents        *prometheus.CounterVec   // event
	MCPServerUp      *prometheus.GaugeVec     // server
	// MCPSampling counts the sampling requests MCP servers send sampled.
	MCPSampling *prometheus.CounterVec // server, outcome

	AccessRequests *prometheus.CounterVec // key
	AccessDenied   *prometheus.CounterVec // reason
	RateLimited    *prometheus.CounterVec // key, limit
	// LimitUnchecked counts what shared limits let in unchecked.
	LimitUnchecked *prometheus.CounterVec // limit
	// SamplingInFlight reads the count CountSamplingInFlight was given.
	SamplingInFlight prometheus.GaugeFunc

	// Cost is what upstream calls cost at the configured prices.
	Cost *prometheus.CounterVec // key, provider, model
	// RetryCost and RetryTokens are what the answers that corrective
	// retries replaced cost.
	RetryCost   *prometheus.CounterVec // method
	RetryTokens *prometheus.CounterVec // method, type
	// Unpriced counts the calls of models without a price.
	Unpriced *prometheus.CounterVec // provider, model

	MCPToolCalls    *prometheus.CounterVec   // tool, sampler, outcome
	MCPToolDuration *prometheus.HistogramVec // tool, sampler

	inFlight atomic.Pointer[func() int]
}

// New creates the collectors and registers them on reg. A nil reg creates
// unregistered collectors (for tests that do not read them).
func New(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		HTTPRequests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		HTTPDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sampled_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route pattern and method (streams excluded).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"route", "method"}),
		Samples: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_samples_total",
			Help: "Sampling requests by endpoint, mode, provider, model and outcome.",
		}, []string{"endpoint", "mode", "provider", "model", "outcome"}),
		ValidationFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_validation_failures_total",
			Help: "Model outputs that failed validation, by method and kind.",
		}, []string{"method", "kind"}),
		ValidationRetries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_validation_retries_total",
			Help: "Corrective retries sent by the guaranteed helpers.",
		}, []string{"method"}),
		ValidationExhausted: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_sample_validation_errors_total",
			Help: "Guaranteed-helper requests that ran out of attempts (answered 422).",
		}, []string{"method"}),
		UpstreamRetries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_upstream_retries_total",
			Help: "Upstream calls retried, by provider and reason.",
		}, []string{"provider", "reason"}),
		UpstreamDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sampled_upstream_request_duration_seconds",
			Help:    "Duration of one upstream model call, by provider, model and outcome.",
			Buckets: []float64{0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 300},
		}, []string{"provider", "model", "outcome"}),
		Tokens: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_tokens_total",
			Help: "Tokens used, by provider, model and type (input, output).",
		}, []string{"provider", "model", "type"}),
		TokenUsage: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sampled_upstream_token_usage",
			Help:    "Tokens used by one upstream call, by provider, model and type (input, output).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 14),
		}, []string{"provider", "model", "type"}),
		FirstFragment: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sampled_upstream_first_fragment_seconds",
			Help:    "Time from the start of a streamed upstream call to its first fragment (time to first token), by provider and model.",
			Buckets: []float64{0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96},
		}, []string{"provider", "model"}),
		StreamFragments: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_upstream_stream_fragments_total",
			Help: "Fragments (chunks) received from streamed upstream calls, by provider and model.",
		}, []string{"provider", "model"}),
		GatewayOverhead: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "sampled_gateway_overhead_seconds",
			Help:    "Time a sampling request spends in sampled itself, upstream calls excluded.",
			Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1},
		}),
		LoopsTotal: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_loops_total",
			Help: "Tool loops finished, by terminal status.",
		}, []string{"status"}),
		LoopsActive: f.NewGauge(prometheus.GaugeOpts{
			Name: "sampled_loops_active",
			Help: "Tool loops running now.",
		}),
		LoopIterations: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "sampled_loop_iterations",
			Help:    "Iterations a finished tool loop ran.",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100},
		}),
		ToolCalls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_tool_calls_total",
			Help: "Tool calls made by loops, by exposed tool name (known tools only, else other) and outcome.",
		}, []string{"tool", "outcome"}),
		ToolCallDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sampled_tool_call_duration_seconds",
			Help:    "Duration of tool calls, by MCP server.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server"}),
		SSESubscribers: f.NewGauge(prometheus.GaugeOpts{
			Name: "sampled_sse_subscribers",
			Help: "Open SSE streams of loop events.",
		}),
		SSEEvents: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_sse_events_total",
			Help: "Loop events published, by event name.",
		}, []string{"event"}),
		MCPServerUp: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sampled_mcp_server_up",
			Help: "Whether an MCP tool server is connected (1) or not (0).",
		}, []string{"server"}),
		MCPSampling: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_mcp_sampling_requests_total",
			Help: "sampling/createMessage requests from MCP servers, by configured server and outcome (ok, refused, invalid, error, cancelled).",
		}, []string{"server", "outcome"}),
		AccessRequests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_access_requests_total",
			Help: "Requests let in, by API key name (anonymous without keys).",
		}, []string{"key"}),
		AccessDenied: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_access_denied_total",
			Help: "Requests answered 401, by reason: no_key (no bearer token) or bad_key (not a configured key).",
		}, []string{"reason"}),
		RateLimited: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_rate_limited_total",
			Help: "Requests answered 429, by API key name and the limit reached: requests (per minute), loops (concurrent), in_flight (the global cap on sampling requests); " +
				"and model calls refused by tokens (per minute) or budget (spend per UTC day or month).",
		}, []string{"key", "limit"}),
		LimitUnchecked: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_rate_limit_unchecked_total",
			Help: "Requests (limit=requests), loops (limit=loops) and model calls (limit=tokens, limit=budget) let in without their API key's limit checked, because Redis, " +
				"which holds the limits replicas share, did not answer in time: the limits fail open.",
		}, []string{"limit"}),
		Cost: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_cost_usd_total",
			Help: "What upstream calls cost in US dollars at the configured prices, by API key name (anonymous without keys), provider and model.",
		}, []string{"key", "provider", "model"}),
		RetryCost: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_retry_cost_usd_total",
			Help: "What the answers that failed validation and were corrected by a retry cost in US dollars, by method: the cost of corrective retries.",
		}, []string{"method"}),
		RetryTokens: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_retry_tokens_total",
			Help: "Tokens of the answers that failed validation and were corrected by a retry, by method and type (input, output).",
		}, []string{"method", "type"}),
		Unpriced: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_unpriced_calls_total",
			Help: "Upstream calls of models without a configured price (counted at a cost of 0), by provider and model.",
		}, []string{"provider", "model"}),
		// Label values are bounded: tool is one of the MCP server's tool
		// names, sampler is client, service or none.
		MCPToolCalls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_mcp_tool_calls_total",
			Help: "Calls of the MCP server's tools, by tool, who sampled (client, service, none) and outcome.",
		}, []string{"tool", "sampler", "outcome"}),
		MCPToolDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sampled_mcp_tool_call_duration_seconds",
			Help:    "Duration of the MCP server's tool calls, by tool and who sampled.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"tool", "sampler"}),
	}
	m.SamplingInFlight = f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sampled_sampling_in_flight",
		Help: "Sampling requests being served now (POST /v1/sample*, /v1/messages, /openai/v1/chat/completions, POST /mcp), which limits.inFlightSamples caps.",
	}, func() float64 {
		if n := m.inFlight.Load(); n != nil {
			return float64((*n)())
		}
		return 0
	})
	// Series whose labels are fixed exist from the start, at 0: a
	// dashboard of an idle service shows zeros, and increase() sees the
	// first increment.
	for method, kinds := range map[string][]string{
		sampler.MethodSchema: {sampler.KindInvalidJSON, sampler.KindSchemaMismatch},
		sampler.MethodTools:  {sampler.KindNoToolCall, sampler.KindUnknownTool, sampler.KindInvalidArguments},
		sampler.MethodSample: {sampler.KindNoToolCall, sampler.KindUnknownTool, sampler.KindInvalidArguments,
			sampler.KindToolCallForbidden, sampler.KindWrongTool},
	} {
		m.ValidationRetries.WithLabelValues(method)
		m.RetryCost.WithLabelValues(method)
		m.RetryTokens.WithLabelValues(method, "input")
		m.RetryTokens.WithLabelValues(method, "output")
		m.ValidationExhausted.WithLabelValues(method)
		for _, kind := range kinds {
			m.ValidationFailures.WithLabelValues(method, kind)
		}
	}
	// Requests refused before a model was chosen (see Model for the rest).
	for endpoint, modes := range endpointModes() {
		for _, mode := range modes {
			m.Samples.WithLabelValues(endpoint, mode, "other", "other", sampler.OutcomeInvalidRequest)
		}
	}
	for _, r := range []string{DeniedNoKey, DeniedBadKey} {
		m.AccessDenied.WithLabelValues(r)
	}
	for _, l := range []string{LimitRequests, LimitLoops, LimitTokens, LimitBudget} {
		m.LimitUnchecked.WithLabelValues(l)
	}
	return m
}

// Reasons of AccessDenied.
const (
	DeniedNoKey  = "no_key"
	DeniedBadKey = "bad_key"
)

// Limits of RateLimited.
const (
	LimitRequests = "requests"
	LimitLoops    = "loops"
	LimitInFlight = "in_flight"
	// LimitTokens and LimitBudget are a key's tokens per minute and its
	// spend per day or month (access.LimitTokens, access.LimitBudget).
	LimitTokens = "tokens"
	LimitBudget = "budget"
)

// AnonymousKey is the key label of requests to a service without API keys.
const AnonymousKey = "anonymous"

// KeyLabel is the key label of a caller whose API key has this name:
// the name, or AnonymousKey for "" (no keys configured).
func KeyLabel(name string) string {
	if name == "" {
		return AnonymousKey
	}
	return name
}

// AccessKeys creates the series of each key name (the configured names,
// or AnonymousKey alone without keys), so that alerts see them from the
// start. Key label values are these names only.
func (m *Metrics) AccessKeys(names []string) {
	for _, k := range names {
		m.AccessRequests.WithLabelValues(k)
		for _, l := range []string{LimitRequests, LimitLoops, LimitInFlight, LimitTokens, LimitBudget} {
			m.RateLimited.WithLabelValues(k, l)
		}
	}
}

// Spend creates the cost series of each key name (as AccessKeys takes
// them) and configured model, at 0.
func (m *Metrics) Spend(keys []string, models []sampler.Model) {
	for _, model := range models {
		for _, k := range keys {
			m.Cost.WithLabelValues(k, model.Provider, model.ID())
		}
	}
}

// endpointModes returns the endpoint labels of sampled_samples_total, as
// the routes (handlers), the loops' model calls (loop) and the MCP servers'
// sampling requests (host) name them, each with the modes its requests
// can have.
func endpointModes() map[string][]string {
	all := []string{sampler.ModePlain, sampler.ModeSchema, sampler.ModeTools}
	withTools := []string{sampler.ModePlain, sampler.ModeTools}
	return map[string][]string{"sample": all, "sample_schema": {sampler.ModeSchema}, "sample_tools": {sampler.ModeTools},
		"messages": withTools, "loops": withTools, "mcp_host": withTools}
}

// Model creates the series of a configured model, at 0: the sampling
// requests of every endpoint and mode that it answered (ok) or whose
// upstream calls failed (upstream_error), and the upstream retries of its
// provider by reason.
func (m *Metrics) Model(model sampler.Model) {
	for endpoint, modes := range endpointModes() {
		for _, mode := range modes {
			m.Samples.WithLabelValues(endpoint, mode, model.Provider, model.ID(), sampler.OutcomeOK)
			m.Samples.WithLabelValues(endpoint, mode, model.Provider, model.ID(), sampler.OutcomeUpstreamError)
		}
	}
	m.Unpriced.WithLabelValues(model.Provider, model.ID())
	for _, reason := range []string{"timeout", "connection", "rate_limited", "server_error", "client_error"} {
		m.UpstreamRetries.WithLabelValues(model.Provider, reason)
	}
}

// CountSamplingInFlight makes sampled_sampling_in_flight read n when it is
// scraped: the count the cap on sampling requests keeps
// (access.Guard.InFlight), rather than a second count kept beside it on
// every request.
func (m *Metrics) CountSamplingInFlight(n func() int) { m.inFlight.Store(&n) }

// UpstreamRetry counts a retried upstream call.
func (m *Metrics) UpstreamRetry(provider, reason string) {
	m.UpstreamRetries.WithLabelValues(provider, reason).Inc()
}

// AnswerInvalid counts an answer that failed validation and, when retried,
// the corrective retry.
func (m *Metrics) AnswerInvalid(method, kind string, retried bool) {
	m.ValidationFailures.WithLabelValues(method, kind).Inc()
	if retried {
		m.ValidationRetries.WithLabelValues(method).Inc()
	}
}

// Retried counts the tokens and cost of an answer a corrective retry
// replaces.
func (m *Metrics) Retried(method string, u sampler.Usage) {
	m.RetryCost.WithLabelValues(method).Add(u.CostUSD)
	m.RetryTokens.WithLabelValues(method, "input").Add(float64(u.InputTokens))
	m.RetryTokens.WithLabelValues(method, "output").Add(float64(u.OutputTokens))
}

// Exhausted counts a guaranteed helper that ran out of attempts.
func (m *Metrics) Exhausted(method string) { m.ValidationExhausted.WithLabelValues(method).Inc() }

// Overhead observes the time a request spent in sampled itself.
func (m *Metrics) Overhead(d time.Duration) { m.GatewayOverhead.Observe(d.Seconds()) }

// Sampled counts a finished sampling request under its caller's endpoint
// label; a request without one is not counted. modelID is the configured
// model ("provider/model") that answered or failed, empty when none was
// called; its values are bounded by the configuration.
func (m *Metrics) Sampled(endpoint, mode, modelID, outcome string) {
	if endpoint == "" {
		return
	}
	provider, model := "other", "other"
	if p, _, ok := strings.Cut(modelID, "/"); ok {
		provider, model = p, modelID
	}
	m.Samples.WithLabelValues(endpoint, mode, provider, model, outcome).Inc()
}

// Redis holds the collectors of the Redis operations of the run store and
// of the API keys' shared limits. They are registered only when Redis is
// configured. Label op is one of the fixed operation names (create, append,
// finish, subscribe, xread, cancel, …; limit_rate, limit_loop_start,
// limit_loop_renew, limit_loop_release, limit_budget_read,
// limit_budget_charge).
type Redis struct {
	Duration *prometheus.HistogramVec // op
	Errors   *prometheus.CounterVec   // op
}

// NewRedis creates the Redis collectors and registers them on reg (nil:
// unregistered).
func NewRedis(reg prometheus.Registerer) *Redis {
	f := promauto.With(reg)
	return &Redis{
		Duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sampled_redis_operation_duration_seconds",
			Help: "Duration of one Redis operation of the run store or the shared limits, by operation; " +
				"a live loop's xread includes its blocking wait.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"op"}),
		Errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sampled_redis_errors_total",
			Help: "Redis operations of the run store or the shared limits that failed, by operation (answers such as run not found excluded).",
		}, []string{"op"}),
	}
}

// Observe records one operation; it fits the Redis store's Options.Observe.
func (r *Redis) Observe(op string, d time.Duration, err error) {
	r.Duration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		r.Errors.WithLabelValues(op).Inc()
	}
}
