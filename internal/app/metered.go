package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
)

// metered is a Provider whose calls are recorded: duration and outcome,
// and the tokens of each answer, by provider and configured model.
type metered struct {
	sampler.Provider
	models map[string]*modelSeries // by the provider's own model name
	other  *modelSeries            // a model not in the catalog
}

// modelSeries are the series of one model, looked up once.
type modelSeries struct {
	ok, failed          prometheus.Observer
	inTokens, outTokens prometheus.Counter
	inUsage, outUsage   prometheus.Observer
	firstFragment       prometheus.Observer
	fragments           prometheus.Counter
}

func newModelSeries(m *metrics.Metrics, provider, id string) *modelSeries {
	return &modelSeries{
		ok:        m.UpstreamDuration.WithLabelValues(provider, id, "ok"),
		failed:    m.UpstreamDuration.WithLabelValues(provider, id, "error"),
		inTokens:  m.Tokens.WithLabelValues(provider, id, "input"),
		outTokens: m.Tokens.WithLabelValues(provider, id, "output"),
		inUsage:   m.TokenUsage.WithLabelValues(provider, id, "input"),
		outUsage:  m.TokenUsage.WithLabelValues(provider, id, "output"),

		firstFragment: m.FirstFragment.WithLabelValues(provider, id),
		fragments:     m.StreamFragments.WithLabelValues(provider, id),
	}
}

// meter wraps p for the models of cat it serves.
func meter(p sampler.Provider, cat *sampler.Catalog, m *metrics.Metrics) *metered {
	mp := &metered{Provider: p, models: map[string]*modelSeries{}, other: newModelSeries(m, p.Name(), "other")}
	for _, model := range cat.Models() {
		if model.Provider == p.Name() {
			mp.models[model.Name] = newModelSeries(m, p.Name(), model.ID())
			m.Model(model)
		}
	}
	return mp
}

// Sample calls the provider and records the call.
func (p *metered) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	series := p.series(req.Model)
	start := time.Now()
	resp, err := p.Provider.Sample(ctx, req)
	return series.record(start, resp, err)
}

// Stream streams from the provider and records the call, with the time to
// its first fragment and the fragments.
func (p *metered) Stream(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (*sampler.Response, error) {
	series := p.series(req.Model)
	start := time.Now()
	first := true
	resp, err := sampler.Stream(ctx, p.Provider, req, func(d sampler.Delta) {
		if first {
			series.firstFragment.Observe(time.Since(start).Seconds())
			first = false
		}
		series.fragments.Inc()
		emit(d)
	})
	return series.record(start, resp, err)
}

func (p *metered) series(model string) *modelSeries {
	if s, ok := p.models[model]; ok {
		return s
	}
	return p.other
}

// record observes a call that started at start and ended with resp, err.
func (series *modelSeries) record(start time.Time, resp *sampler.Response, err error) (*sampler.Response, error) {
	d := time.Since(start).Seconds()
	if err != nil {
		series.failed.Observe(d)
		return nil, err
	}
	series.ok.Observe(d)
	series.inTokens.Add(float64(resp.Usage.InputTokens))
	series.outTokens.Add(float64(resp.Usage.OutputTokens))
	series.inUsage.Observe(float64(resp.Usage.InputTokens))
	series.outUsage.Observe(float64(resp.Usage.OutputTokens))
	return resp, nil
}
