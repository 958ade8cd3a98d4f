package loop_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
	runsredis "github.com/sampled/sampled/internal/runs/redis"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/redistest"
	"github.com/sampled/sampled/internal/tools"
)

// bigTools is a ToolSource of one tool, "big", whose result is size bytes
// of text.
type bigTools struct{ size int }

func (b bigTools) Tools() []tools.Tool {
	return []tools.Tool{{Name: "big", Description: "Return a lot of text.", InputSchema: json.RawMessage(`{"type":"object"}`)}}
}

func (b bigTools) Call(context.Context, string, json.RawMessage) (*tools.Result, error) {
	return &tools.Result{Content: []sampler.Content{sampler.TextBlock(strings.Repeat("x", b.size))}}, nil
}

// redisPrefixes numbers the key prefixes of the Redis stores of the tests.
var redisPrefixes atomic.Int64

// boundStores are the stores the size bounds are tested with: the caps
// are the engine's, the same whatever keeps the runs.
var boundStores = []struct {
	name string
	open func(t *testing.T) runs.Store
}{
	{"memory", func(*testing.T) runs.Store { return memory.New(memory.Options{}) }},
	{"redis", func(t *testing.T) runs.Store {
		s := runsredis.New(redistest.Client(t, 20), runsredis.Options{Prefix: fmt.Sprintf("loop%d:", redisPrefixes.Add(1))})
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// TestToolResultCap: a tool result longer than the cap reaches the model,
// the transcript and the tool.completed event cut, with a marker that says
// so; a shorter one is left whole.
func TestToolResultCap(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name    string
		size    int
		cap     int // Options.MaxToolResultBytes; 0 is the default, 1 MiB
		wantCut bool
	}{
		{"3 MiB, default cap", 3 * mib, 0, true},
		{"just over the cap", 1001, 1000, true},
		{"at the cap", 1000, 1000, false},
		{"small, default cap", 100, 0, false},
	}
	for _, st := range boundStores {
		for _, tt := range tests {
			t.Run(st.name+"/"+tt.name, func(t *testing.T) {
				f := newFakeOpenAI(t, sequence(reply{body: toolCallsReply(call{"c1", "big", map[string]any{}})}, reply{body: textReply("done")}))
				store := st.open(t)
				e, _ := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: bigTools{tt.size}, Store: store, MaxToolResultBytes: tt.cap})
				id := start(t, e, loop.Spec{Messages: prompt("Read it all.")})
				evs := collect(t, store, id)
				if d := last(evs); d.Status != loop.StatusCompleted {
					t.Fatalf("loop.completed = %s", evs[len(evs)-1].Raw)
				}
				limit := cmp.Or(tt.cap, mib)
				tc := named(evs, loop.EventToolCompleted)
				if len(tc) != 1 {
					t.Fatalf("%d tool.completed events, want 1", len(tc))
				}
				reqs := f.requests()
				if len(reqs) != 2 || len(reqs[1].toolMessages()) != 1 {
					t.Fatalf("the model got %d requests, want 2 with one tool message", len(reqs))
				}
				snap := snapshot(t, store, id)
				seen := map[string]string{
					"tool.completed":   tc[0].text(),
					"the model's view": reqs[1].toolMessages()[0].Content,
					"the transcript":   sampler.TextOf(snap.Messages[2].Content[0].Content),
				}
				for where, text := range seen {
					cut := strings.Contains(text, "sampled cut this tool result")
					switch {
					case cut != tt.wantCut:
						t.Errorf("%s: cut %v, want %v (%d bytes: %.80q…)", where, cut, tt.wantCut, len(text), text)
					case tt.wantCut && (len(text) > limit+200 || !strings.Contains(text, fmt.Sprint(tt.size)) || !strings.HasPrefix(text, "xxx")):
						t.Errorf("%s: %d bytes, want the first %d and a marker naming the size %d: …%q", where, len(text), limit, tt.size, text[max(0, len(text)-150):])
					case !tt.wantCut && text != strings.Repeat("x", tt.size):
						t.Errorf("%s: %d bytes, want the %d of the result", where, len(text), tt.size)
					}
				}
			})
		}
	}
}

// TestRunSizeCap: a run whose event log or transcript would grow past
// MaxRunBytes ends failed, saying why, and keeps neither past the cap.
func TestRunSizeCap(t *testing.T) {
	const maxRun = 100000
	for _, st := range boundStores {
		t.Run(st.name, func(t *testing.T) {
			// The model calls the tool for ever: each result is 40 KB, under
			// the tool cap; the third would take the run past its cap.
			f := newFakeOpenAI(t, sequence(reply{body: toolCallsReply(call{"c1", "big", map[string]any{}})}))
			store := st.open(t)
			e, _ := newEngine(t, loop.Options{Sampler: f.sampler(t, 0), Tools: bigTools{40000}, Store: store, MaxRunBytes: maxRun})
			id := start(t, e, loop.Spec{Messages: prompt("Read it all."), MaxIterations: ptr(20)})
			evs := collect(t, store, id)
			d := last(evs)
			if d.Status != loop.StatusFailed || !strings.Contains(d.Error, "size limit") || !strings.Contains(d.Error, fmt.Sprint(maxRun)) {
				t.Fatalf("loop.completed = %s, want failed for its size limit of %d bytes", evs[len(evs)-1].Raw, maxRun)
			}
			if n := len(f.requests()); n > 3 {
				t.Errorf("the model got %d requests; a run past its cap must stop", n)
			}
			logBytes := 0
			for _, ev := range evs[:len(evs)-1] {
				logBytes += len(ev.Raw)
			}
			if logBytes > maxRun {
				t.Errorf("the event log holds %d bytes before its end, more than the cap of %d", logBytes, maxRun)
			}
			b, err := store.Snapshot(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > maxRun {
				t.Errorf("the final snapshot is %d bytes, more than the cap of %d", len(b), maxRun)
			}
			if snap := snapshot(t, store, id); snap.Status != loop.StatusFailed || snap.Error != d.Error {
				t.Errorf("snapshot status %q error %q, want those of loop.completed", snap.Status, snap.Error)
			}
		})
	}
}
