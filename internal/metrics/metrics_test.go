package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sampled/sampled/internal/sampler"
)

// TestSeriesAtStart: the series whose labels are known exist before
// anything is counted, at 0, so that an idle service's dashboard shows
// zeros.
func TestSeriesAtStart(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.Model(sampler.Model{Provider: "openai", Name: "gpt-4o-mini"})
	m.Model(sampler.Model{Provider: "openai", Name: "gpt-4o"})
	// 11 endpoint and mode pairs: invalid_request under model other, ok
	// and upstream_error for each of the two models.
	want := map[string]int{"samples": 11 * (1 + 2*2), "validation failures": 2 + 3 + 5, "upstream retries": 5}
	count := func() map[string]int {
		return map[string]int{"samples": testutil.CollectAndCount(m.Samples),
			"validation failures": testutil.CollectAndCount(m.ValidationFailures), "upstream retries": testutil.CollectAndCount(m.UpstreamRetries)}
	}
	if got := count(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	// Series of these labels were among them.
	m.Samples.WithLabelValues("sample_tools", "tools", "openai", "openai/gpt-4o", "ok")
	m.Samples.WithLabelValues("mcp_host", "plain", "other", "other", "invalid_request")
	m.ValidationFailures.WithLabelValues("sample", "wrong_tool")
	m.UpstreamRetries.WithLabelValues("openai", "rate_limited")
	if got := count(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series %v after asking for known ones, want %v", got, want)
	}
}
