package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Redis holds the collectors of the Redis operations of the run store and
// of the API keys' shared limits. They are registered only when Redis is
// configured. Label op is one of the fixed operation names (create, append,
// finish, subscribe, xread, cancel, …; limit_rate, limit_loop_start,
// limit_loop_renew, limit_loop_release).
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
