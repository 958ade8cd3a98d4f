package loop

import "context"

// Run starts a loop as Start does and waits for its end: it returns the
// final snapshot (Status says how it ended). Ending ctx cancels the loop,
// and Run still returns the cancelled run's snapshot. onIteration, if not
// nil, is called after each iteration with its number, from the loop's
// goroutine. An error means the loop did not start (an invalid spec is a
// *sampler.InvalidError, a closed engine ErrClosed).
func (e *Engine) Run(ctx context.Context, spec Spec, onIteration func(int)) (*Snapshot, error) {
	r, done, err := e.start(ctx, spec, onIteration)
	if err != nil {
		return nil, err
	}
	<-done
	snap := *r.snap
	return &snap, nil
}
