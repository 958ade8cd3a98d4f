package sampler

import (
	"context"
	"errors"
	"testing"
)

// limitedError is a refusal by the caller's own limits, as
// access.LimitError is.
type limitedError struct{}

func (limitedError) Error() string { return "this API key's budget is spent" }
func (limitedError) Limited() bool { return true }

// TestLimitedPassesThrough: a call refused by the caller's limits is
// neither retried nor followed by the model's fallback, in plain mode and
// in a guaranteed helper; the error comes back as it was, and the
// request's outcome is limited.
func TestLimitedPassesThrough(t *testing.T) {
	refuse := func(*Request) (*Response, error) { return nil, limitedError{} }
	for _, tt := range []struct {
		name string
		run  func(f *fixture, p *Params) (*Result, error)
		mode string
	}{
		{"sample", func(f *fixture, p *Params) (*Result, error) { return f.svc.Sample(context.Background(), p) }, ModePlain},
		{"sampleSchema", func(f *fixture, p *Params) (*Result, error) {
			p.Schema = []byte(`{"type":"object"}`)
			return f.svc.SampleSchema(context.Background(), p)
		}, ModeSchema},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, refuse, text("{}"), text("{}"))
			p := &Params{Request: Request{Messages: []Message{UserMessage(TextBlock("hi"))}, MaxTokens: 10}, Caller: "test"}
			_, err := tt.run(f, p)
			if !errors.Is(err, limitedError{}) {
				t.Fatalf("err = %v, want the limits' refusal as it was", err)
			}
			if len(f.p.got) != 1 || len(f.q.got) != 0 {
				t.Errorf("%d calls of the model and %d of its fallback, want 1 and 0", len(f.p.got), len(f.q.got))
			}
			f.obs.check(t, "sampled test "+tt.mode+"  "+OutcomeLimited, 1)
		})
	}
}
