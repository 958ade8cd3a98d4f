package app

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
)

// metered is a Provider whose calls are recorded: duration and outcome,
// and the tokens of each answer, by provider and configured model. It
// prices each answer too: its usage gets the cost at the model's
// configured price (CostUSD), or is marked unpriced, and the cost is
// counted by the caller's key name, found in the context.
//
// It keeps the caller's budgets as well, for every upstream call of every
// route: before a call, the caller's tokens per minute and spend limits
// check its maxTokens, and what they cost at the model's output price
// (access.Caller.Reserve); a refusal is the call's error, an
// *access.LimitError, counted in sampled_rate_limited_total. After the
// call its tokens and cost are charged to the caller.
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

	provider, id string
	cost         *prometheus.CounterVec // key, provider, model
	limited      *prometheus.CounterVec // key, limit
	price        *config.Price          // nil: unpriced
	unpriced     prometheus.Counter
}

func newModelSeries(m *metrics.Metrics, provider, id string, price *config.Price) *modelSeries {
	return &modelSeries{
		provider: provider, id: id, cost: m.Cost, limited: m.RateLimited, price: price,
		unpriced: m.Unpriced.WithLabelValues(provider, id),

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

// meter wraps p for the models of cat it serves, priced by prices (by
// model ID; a model without one is unpriced).
func meter(p sampler.Provider, cat *sampler.Catalog, m *metrics.Metrics, prices map[string]*config.Price) *metered {
	mp := &metered{Provider: p, models: map[string]*modelSeries{}, other: newModelSeries(m, p.Name(), "other", nil)}
	for _, model := range cat.Models() {
		if model.Provider == p.Name() {
			mp.models[model.Name] = newModelSeries(m, p.Name(), model.ID(), prices[model.ID()])
			m.Model(model)
		}
	}
	return mp
}

// Sample calls the provider and records the call.
func (p *metered) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	series, caller := p.series(req.Model), access.FromContext(ctx)
	if err := series.reserve(ctx, caller, req); err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := p.Provider.Sample(ctx, req)
	return series.record(ctx, caller, start, resp, err)
}

// Stream streams from the provider and records the call, with the time to
// its first fragment and the fragments.
func (p *metered) Stream(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (*sampler.Response, error) {
	series, caller := p.series(req.Model), access.FromContext(ctx)
	if err := series.reserve(ctx, caller, req); err != nil {
		return nil, err
	}
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
	return series.record(ctx, caller, start, resp, err)
}

func (p *metered) series(model string) *modelSeries {
	if s, ok := p.models[model]; ok {
		return s
	}
	return p.other
}

// reserve checks a call of req against the budgets of its caller (the
// context's, nil without an access guard): its maxTokens, and what they
// cost at the model's output price (nothing for an unpriced model). A
// refusal is counted under the caller's key and the limit.
func (series *modelSeries) reserve(ctx context.Context, c *access.Caller, req *sampler.Request) error {
	est := access.Estimate{Tokens: req.MaxTokens}
	if series.price != nil {
		est.USD = float64(req.MaxTokens) * series.price.Output / 1e6
	}
	err := c.Reserve(ctx, est)
	if le := (*access.LimitError)(nil); errors.As(err, &le) {
		series.limited.WithLabelValues(metrics.KeyLabel(c.Name()), le.Limit).Inc()
	}
	return err
}

// record observes a call that started at start and ended with resp, err,
// prices its answer and charges it to its caller.
func (series *modelSeries) record(ctx context.Context, caller *access.Caller, start time.Time, resp *sampler.Response, err error) (*sampler.Response, error) {
	// The answer needs its cost and the budget its charge; the call's
	// series can wait until the answer is out.
	d := time.Since(start).Seconds()
	if err != nil {
		sampler.AfterAnswer(ctx, func() { series.failed.Observe(d) })
		return nil, err
	}
	resp.Usage.CostUSD, resp.Usage.Unpriced = 0, series.price == nil
	if series.price != nil {
		resp.Usage.CostUSD = Cost(resp.Usage, series.price)
	}
	caller.Charge(ctx, resp.Usage.InputTokens+resp.Usage.OutputTokens, resp.Usage.CostUSD)
	usage := resp.Usage
	sampler.AfterAnswer(ctx, func() { series.observe(caller, d, usage) })
	return resp, nil
}

// observe counts a call that answered in d seconds and used u.
func (series *modelSeries) observe(caller *access.Caller, d float64, u sampler.Usage) {
	series.ok.Observe(d)
	series.inTokens.Add(float64(u.InputTokens))
	series.outTokens.Add(float64(u.OutputTokens))
	series.inUsage.Observe(float64(u.InputTokens))
	series.outUsage.Observe(float64(u.OutputTokens))
	if u.Unpriced {
		series.unpriced.Inc()
	} else {
		series.cost.WithLabelValues(metrics.KeyLabel(caller.Name()), series.provider, series.id).Add(u.CostUSD)
	}
}

// Cost is what usage costs at price, in US dollars: each token type's
// count times its price per million. Input read from the provider's
// cache (CachedInputTokens, part of InputTokens) costs CachedInput, when
// the price has one, and Input otherwise.
func Cost(u sampler.Usage, price *config.Price) float64 {
	cached, cachedPrice := min(max(u.CachedInputTokens, 0), u.InputTokens), price.Input
	if price.CachedInput != nil {
		cachedPrice = *price.CachedInput
	}
	return sampler.RoundUSD(float64(u.InputTokens-cached)*price.Input/1e6 + float64(cached)*cachedPrice/1e6 +
		float64(u.OutputTokens)*price.Output/1e6)
}
