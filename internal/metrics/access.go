package metrics

import "github.com/prometheus/client_golang/prometheus"

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

// initAccess creates the collectors of access control and limits, and
// registers them on reg unless it is nil.
func (m *Metrics) initAccess(reg prometheus.Registerer) {
	m.AccessRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sampled_access_requests_total",
		Help: "Requests let in, by API key name (anonymous without keys).",
	}, []string{"key"})
	m.AccessDenied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sampled_access_denied_total",
		Help: "Requests answered 401, by reason: no_key (no bearer token) or bad_key (not a configured key).",
	}, []string{"reason"})
	m.RateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sampled_rate_limited_total",
		Help: "Requests answered 429, by API key name and the limit reached: requests (per minute), loops (concurrent), in_flight (the global cap on sampling requests).",
	}, []string{"key", "limit"})
	m.LimitUnchecked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sampled_rate_limit_unchecked_total",
		Help: "Requests (limit=requests) and loops (limit=loops) let in without their API key's limit checked, because Redis, " +
			"which holds the limits replicas share, did not answer in time: the limits fail open.",
	}, []string{"limit"})
	m.SamplingInFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sampled_sampling_in_flight",
		Help: "Sampling requests being served now (POST /v1/sample*, /v1/messages, POST /mcp), which limits.inFlightSamples caps.",
	}, func() float64 {
		if n := m.inFlight.Load(); n != nil {
			return float64((*n)())
		}
		return 0
	})
	for _, r := range []string{DeniedNoKey, DeniedBadKey} {
		m.AccessDenied.WithLabelValues(r)
	}
	for _, l := range []string{LimitRequests, LimitLoops} {
		m.LimitUnchecked.WithLabelValues(l)
	}
	if reg != nil {
		reg.MustRegister(m.AccessRequests, m.AccessDenied, m.RateLimited, m.LimitUnchecked, m.SamplingInFlight)
	}
}

// AccessKeys creates the series of each key name (the configured names,
// or AnonymousKey alone without keys), so that alerts see them from the
// start. Key label values are these names only.
func (m *Metrics) AccessKeys(names []string) {
	for _, k := range names {
		m.AccessRequests.WithLabelValues(k)
		for _, l := range []string{LimitRequests, LimitLoops, LimitInFlight} {
			m.RateLimited.WithLabelValues(k, l)
		}
	}
}

// CountSamplingInFlight makes sampled_sampling_in_flight read n when it is
// scraped: the count the cap on sampling requests keeps
// (access.Guard.InFlight), rather than a second count kept beside it on
// every request.
func (m *Metrics) CountSamplingInFlight(n func() int) { m.inFlight.Store(&n) }
