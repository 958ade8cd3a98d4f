package offline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/sampler"
)

// instantClock is an after func whose timers fire at once; it records the
// pauses asked of it.
type instantClock struct{ asked []time.Duration }

func (c *instantClock) after(d time.Duration) <-chan time.Time {
	c.asked = append(c.asked, d)
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

// instant returns a provider on an instant clock.
func instant() (*Provider, *instantClock) {
	c := &instantClock{}
	p := New(nil)
	p.after = c.after
	return p, c
}

// TestStreamMatchesSample: Stream returns the Response Sample returns, in
// fragments that join to its text and its calls' arguments, each call's
// fragments carrying its id and name; text comes a few words, JSON a few
// bytes at a time, never cutting a rune; a pause comes before each
// fragment.
func TestStreamMatchesSample(t *testing.T) {
	long := "Tell me, in as many words as it takes, everything there is to know about the rivers of Europe and the cities on their banks."
	object := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"score":{"type":"integer","minimum":1}},"required":["answer","score"]}`)
	tests := []struct {
		name string
		req  sampler.Request
	}{
		{"plain", sampler.Request{Messages: []sampler.Message{userText("hi")}}},
		{"plain long", sampler.Request{Model: ModelDefault, Messages: []sampler.Message{userText(long)}}},
		{"plain cut by maxTokens", sampler.Request{Model: ModelDefault, MaxTokens: 5, Messages: []sampler.Message{userText(long)}}},
		{"plain non-ASCII", sampler.Request{Model: ModelDefault, Messages: []sampler.Message{userText("Grüße aus Zürich — 東京の天気は？")}}},
		{"schema", sampler.Request{Model: ModelDefault, Schema: object, Messages: []sampler.Message{userText(long)}}},
		{"schema non-ASCII", sampler.Request{Model: ModelDefault, Schema: object, Messages: []sampler.Message{userText("Ärger über Öl in Straßen — 東京")}}},
		{"schema broken", sampler.Request{Model: ModelBroken, Schema: object, Messages: []sampler.Message{userText("hi")}}},
		{"tools", sampler.Request{Model: ModelDefault, Tools: testTools(), Messages: []sampler.Message{userText("What's the weather in Paris?")}}},
		{"tools non-ASCII", sampler.Request{Model: ModelDefault, Tools: testTools(), Messages: []sampler.Message{userText("Search the docs for „Größenänderung“ 東京")}}},
		{"tools none", sampler.Request{Model: ModelDefault, Tools: testTools(), ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceNone},
			Messages: []sampler.Message{userText("What's the weather in Paris?")}}},
		{"tools flaky", sampler.Request{Model: ModelFlaky, Tools: testTools(), Messages: []sampler.Message{userText("What's the weather in Paris?")}}},
		{"slow", sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText(long)}}},
		{"slow tools", sampler.Request{Model: ModelSlow, Tools: testTools(), Messages: []sampler.Message{userText("Send an email to ada@example.com about the launch")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, clock := instant()
			want, err := p.Sample(context.Background(), &tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			clock.asked = nil
			var deltas []sampler.Delta
			got, err := p.Stream(context.Background(), &tt.req, func(d sampler.Delta) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Stream's response differs from Sample's (-Sample +Stream):\n%s", diff)
			}

			var text strings.Builder
			args := map[int]string{}
			for _, d := range deltas {
				if !utf8.ValidString(d.Text) || d.ToolCall != nil && !utf8.ValidString(d.ToolCall.Arguments) {
					t.Errorf("fragment %+v cuts a rune", d)
				}
				text.WriteString(d.Text)
				switch {
				case d.ToolCall != nil:
					args[d.ToolCall.Index] += d.ToolCall.Arguments
					if n := len(d.ToolCall.Arguments); n > fragmentBytes+utf8.UTFMax {
						t.Errorf("argument fragment of %d bytes: %q", n, d.ToolCall.Arguments)
					}
				case tt.req.Mode() == sampler.ModeSchema:
					if n := len(d.Text); n > fragmentBytes+utf8.UTFMax {
						t.Errorf("JSON fragment of %d bytes: %q", n, d.Text)
					}
				default:
					if n := len(strings.Fields(d.Text)); n > fragmentWords {
						t.Errorf("text fragment of %d words: %q", n, d.Text)
					}
				}
			}
			if s := sampler.TextOf(got.Content); text.String() != s {
				t.Errorf("text fragments join to %q, want the answer's %q", text.String(), s)
			}
			calls := sampler.ToolCallsOf(got.Content)
			for i, c := range calls {
				if args[i] != string(c.Arguments) {
					t.Errorf("call %d: fragments join to %q, want the arguments %q", i, args[i], c.Arguments)
				}
			}
			for _, d := range deltas {
				if c := d.ToolCall; c != nil && (c.Index >= len(calls) || c.ID != calls[c.Index].ID || c.Name != calls[c.Index].Name) {
					t.Errorf("fragment %+v does not name its call", *c)
				}
			}
			if len(args) != len(calls) {
				t.Errorf("fragments of %d calls, want %d", len(args), len(calls))
			}
			if len(sampler.TextOf(got.Content))+len(calls) > 0 && len(deltas) == 0 {
				t.Error("no fragment")
			}
			if len(clock.asked) != len(deltas) {
				t.Errorf("%d pauses for %d fragments", len(clock.asked), len(deltas))
			}
		})
	}
}

// TestStreamPace: the ordinary models pause StreamPause before each
// fragment; slow spreads SlowDelay over its fragments, at least
// SlowStreamPause apart.
func TestStreamPace(t *testing.T) {
	long := strings.Repeat("many words to say here ", 20)
	tests := []struct {
		name string
		req  sampler.Request
		// check judges the pauses of a stream of n fragments.
		check func(t *testing.T, pauses []time.Duration)
	}{
		{"default", sampler.Request{Messages: []sampler.Message{userText(long)}}, func(t *testing.T, pauses []time.Duration) {
			for _, d := range pauses {
				if d != StreamPause {
					t.Errorf("paused %v, want %v", d, StreamPause)
				}
			}
		}},
		{"slow short", sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText("hi")}}, func(t *testing.T, pauses []time.Duration) {
			var total time.Duration
			for _, d := range pauses {
				total += d
				if d < SlowStreamPause || d < 100*time.Millisecond {
					t.Errorf("paused %v, want %v at least", d, SlowStreamPause)
				}
			}
			if total < SlowDelay-time.Duration(len(pauses)) {
				t.Errorf("paused %v in all, want SlowDelay (%v)", total, SlowDelay)
			}
		}},
		{"slow long", sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText(long)}}, func(t *testing.T, pauses []time.Duration) {
			for _, d := range pauses {
				if d != SlowStreamPause {
					t.Errorf("paused %v, want %v", d, SlowStreamPause)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, clock := instant()
			n := 0
			if _, err := p.Stream(context.Background(), &tt.req, func(sampler.Delta) { n++ }); err != nil {
				t.Fatal(err)
			}
			if n < 2 || len(clock.asked) != n {
				t.Fatalf("%d pauses for %d fragments, want as many, and more than one", len(clock.asked), n)
			}
			tt.check(t, clock.asked)
		})
	}
}

// TestStreamCancelled: cancelling the context mid-stream ends the stream
// at once, with the context's error and no fragment after.
func TestStreamCancelled(t *testing.T) {
	long := strings.Repeat("a stream that goes on and on ", 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		n        int
		canceled time.Time
	)
	_, err := New(nil).Stream(ctx, &sampler.Request{Messages: []sampler.Message{userText(long)}}, func(d sampler.Delta) {
		if n++; n == 2 {
			canceled = time.Now()
			cancel()
		}
	})
	took := time.Since(canceled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stream error = %v, want context.Canceled", err)
	}
	if n != 2 {
		t.Errorf("%d fragments, want none after the cancellation", n)
	}
	if took > 500*time.Millisecond {
		t.Errorf("Stream returned %v after the cancellation", took)
	}
}

// TestStreamSlowCancelled: slow's pauses end with the context, whatever
// the clock does.
func TestStreamSlowCancelled(t *testing.T) {
	p := New(nil)
	p.after = func(time.Duration) <-chan time.Time { return nil } // never fires
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	n := 0
	resp, err := p.Stream(ctx, &sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText("hi")}}, func(sampler.Delta) { n++ })
	if !errors.Is(err, context.DeadlineExceeded) || resp != nil || n != 0 {
		t.Errorf("Stream = %+v, %v after %d fragments; want the context's error and no fragment", resp, err, n)
	}
}

// TestStreamErrors: a request Sample refuses, Stream refuses before any
// fragment.
func TestStreamErrors(t *testing.T) {
	for _, req := range []*sampler.Request{
		{Model: "nope", Messages: []sampler.Message{userText("hi")}},
		{Model: ModelDefault, Schema: json.RawMessage(`{"type":`), Messages: []sampler.Message{userText("hi")}},
	} {
		p, _ := instant()
		_, want := p.Sample(context.Background(), req)
		n := 0
		resp, err := p.Stream(context.Background(), req, func(sampler.Delta) { n++ })
		if err == nil || want == nil || err.Error() != want.Error() || resp != nil || n != 0 {
			t.Errorf("Stream = %+v, %v after %d fragments; want Sample's error %v", resp, err, n, want)
		}
	}
}

// TestStreamSlowRealClock: on the real clock, slow's fragments arrive
// SlowStreamPause apart at least, and the whole takes SlowDelay at least.
func TestStreamSlowRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("takes SlowDelay")
	}
	start := time.Now()
	var at []time.Time
	if _, err := New(nil).Stream(context.Background(), &sampler.Request{Model: ModelSlow, Messages: []sampler.Message{userText("Name three rivers of Europe")}},
		func(sampler.Delta) { at = append(at, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < SlowDelay {
		t.Errorf("took %v, want at least %v", took, SlowDelay)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < SlowStreamPause {
			t.Errorf("fragment %d came %v after the one before, want %v at least", i, gap, SlowStreamPause)
		}
	}
}

// TestPieces: pieces join to what was cut.
func TestPieces(t *testing.T) {
	for _, s := range []string{"", " ", "one", "  lead and trail  ", "a b c d e f g", "tab\tand\nnewline words here", "Grüße aus Zürich 東京の天気"} {
		if got := strings.Join(wordPieces(s, 3), ""); got != s {
			t.Errorf("wordPieces(%q) join to %q", s, got)
		}
		if got := strings.Join(bytePieces(s, 4), ""); got != s {
			t.Errorf("bytePieces(%q) join to %q", s, got)
		}
	}
	if diff := cmp.Diff([]string{"a b c ", "d e f ", "g"}, wordPieces("a b c d e f g", 3)); diff != "" {
		t.Errorf("wordPieces (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"東京", "の天", "気"}, bytePieces("東京の天気", 4)); diff != "" {
		t.Errorf("bytePieces (-want +got):\n%s", diff)
	}
}
