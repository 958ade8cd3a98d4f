package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRedisObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRedis(reg)
	r.Observe("append", 300*time.Microsecond, nil)
	r.Observe("append", 2*time.Millisecond, errors.New("connection refused"))
	r.Observe("xread", time.Second, nil)
	want := `
# HELP sampled_redis_errors_total Redis operations of the run store or the shared limits that failed, by operation (answers such as run not found excluded).
# TYPE sampled_redis_errors_total counter
sampled_redis_errors_total{op="append"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sampled_redis_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(r.Duration); n != 2 {
		t.Errorf("%d duration series, want 2 (append, xread)", n)
	}
}
