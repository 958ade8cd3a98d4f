package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// settle is how long the interleaved client waits after an answer before
// its next request. Without it, the control (a second floor) read 2 µs
// under the floor: in the rotation of three, the floor's request comes
// right after sampled's, beside sampled's after-answer work, in two turns
// of three, the control's in one. With 150 µs it read 0.0 µs (median of
// 10 runs each), and sampled's difference stayed the same (+21.0 against
// +21.5 µs).
const settle = 150 * time.Microsecond

// subInterleave is the c=1 latency client: one request to each target in
// turn, rather than a run of requests to one target and then to the next.
const subInterleave = "-side-interleave"

// target is one gateway (or the fake itself) as the interleaved client
// sees it.
type target struct {
	URL  string `json:"url"`
	Body []byte `json:"body"`
}

// interleave sends n requests to each target, one at a time, one to each
// target in turn: the gateways see the same machine at the same moments,
// so that what the machine does around them (other tenants, the
// frequency, the caches) moves them alike and falls out of their
// difference, where runs of requests one target after the other meet the
// machine at different moments. The target that goes first in a turn
// moves by one from turn to turn, so that each takes every place equally
// often. Each target has its own client and kept-alive connection. It
// returns each target's count and latencies (p50, p99; no rate, the
// targets share the run's time); any failure ends it.
func interleave(ctx context.Context, targets []target, n int, timeout time.Duration) ([]loadResult, error) {
	clients := make([]*http.Client, len(targets))
	for i := range clients {
		clients[i] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: timeout}
		defer clients[i].CloseIdleConnections()
	}
	lat := make([][]time.Duration, len(targets))
	for i := 0; i < n && ctx.Err() == nil; i++ {
		for k := range targets {
			j := (i + k) % len(targets)
			t := time.Now()
			if err := post(clients[j], targets[j].URL, targets[j].Body); err != nil {
				return nil, fmt.Errorf("%s: %w", targets[j].URL, err)
			}
			lat[j] = append(lat[j], time.Since(t))
			// The work a gateway does after its answer (sampled's log line
			// and metrics) is done before the next side's request, rather
			// than beside it on the other core. Spinning: a timer would add
			// a wake-up of its own.
			for answered := time.Now(); time.Since(answered) < settle; {
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := make([]loadResult, len(targets))
	for j, l := range lat {
		slices.Sort(l)
		res[j] = loadResult{OK: int64(len(l)), P50Ns: int64(quantile(l, .50)), P99Ns: int64(quantile(l, .99))}
	}
	return res, nil
}

// interleaveChild runs interleave for the targets given as JSON and
// prints their results as a JSON array.
func interleaveChild(ctx context.Context, targetsJSON string, n int, timeout time.Duration, stdout io.Writer) error {
	var targets []target
	if err := json.Unmarshal([]byte(targetsJSON), &targets); err != nil || len(targets) == 0 || n < 1 {
		return fmt.Errorf("the interleaved client needs -targets (a JSON array of {url, body}) and -n >= 1 (%v)", err)
	}
	res, err := interleave(ctx, targets, n, timeout)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

// runInterleaved runs the interleaved client in its own process and
// returns each target's result, in the order of targets.
func runInterleaved(ctx context.Context, targets []target, n int) ([]loadResult, error) {
	tj, err := json.Marshal(targets)
	if err != nil {
		return nil, err
	}
	var res []loadResult
	if _, err := runSelf(ctx, &res, subInterleave, "-targets", string(tj), "-n", strconv.Itoa(n)); err != nil {
		return nil, err
	}
	if len(res) != len(targets) {
		return nil, fmt.Errorf("the interleaved client answered for %d targets of %d", len(res), len(targets))
	}
	return res, nil
}
