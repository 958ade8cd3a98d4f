package main

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// pairsOptions configure the c=1 latency pairs: plain mode only, the
// latency measurement of the side-by-side run repeated many times.
type pairsOptions struct {
	pairs int // alternating rounds
	n     int // requests per measurement
}

// runPairs measures c=1 p50 latency of the floor, of a second floor
// process and of sampled, each in its own process as in runSide, with
// their requests interleaved (see interleave). The second floor is the
// control: its difference to the first is what the machine alone makes of
// two identical gateways, the precision a difference here can be read to.
// A side-by-side run has three latency rounds; this has as many as asked,
// so that the median of the differences settles.
func runPairs(ctx context.Context, o pairsOptions, stdout io.Writer) error {
	modes, err := sideModes()
	if err != nil {
		return err
	}
	plain := modes[0]
	fake, err := startChild(ctx, subFake)
	if err != nil {
		return err
	}
	defer fake.stop()
	const floor2 = "floor (control)"
	sides := []string{sideFloor, floor2, sideSampled}
	var targets []target
	for _, side := range sides {
		g, err := startGateway(ctx, side, fake.url) // the control is a floor
		if err != nil {
			return err
		}
		defer g.stop()
		targets = append(targets, target{URL: g.url + "/v1/sample", Body: plain.body})
	}
	fmt.Fprintf(stdout, "c=1 pairs: %d rounds of %d plain requests to each of the floor, a second floor and sampled, interleaved\n", o.pairs, o.n)
	if _, err := runInterleaved(ctx, targets, max(o.n/4, 1)); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	p50 := map[string][]float64{}
	for range o.pairs {
		res, err := runInterleaved(ctx, targets, o.n)
		if err != nil {
			return fmt.Errorf("c=1: %w", err)
		}
		for i, side := range sides {
			p50[side] = append(p50[side], float64(res[i].P50Ns)/1e3)
		}
	}
	fmt.Fprintf(stdout, "%17s  %8s  %14s  %12s  %s\n", "side", "c=1 p50", "minus floor", "of the floor", "middle half of the rounds' differences")
	fmt.Fprintf(stdout, "%17s  %6.0fµs\n", sideFloor, median(p50[sideFloor]))
	for _, side := range sides[1:] {
		// Each round's difference, in µs and as a part of the floor's own
		// latency in that round: the gap grows with the machine's slowness
		// (docs/benchmarks.md, "Ninth round"), which µs alone do not show.
		d, share := make([]float64, o.pairs), make([]float64, o.pairs)
		for i, floor := range p50[sideFloor] {
			d[i] = p50[side][i] - floor
			share[i] = 100 * d[i] / floor
		}
		s := slices.Sorted(slices.Values(d))
		fmt.Fprintf(stdout, "%17s  %6.0fµs  %+12.1fµs  %+11.1f%%  %+.0f to %+.0f µs\n", side, median(p50[side]), median(d), median(share), s[len(s)/4], s[(3*len(s))/4])
	}
	return nil
}
