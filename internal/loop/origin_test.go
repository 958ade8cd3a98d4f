package loop_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/loop"
)

// TestOrigin checks that a run's origin is in its snapshot and its
// loop.started event, http when the spec gives none.
func TestOrigin(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, false, nil)
	tests := []struct {
		name string
		in   loop.Origin
		want loop.Origin
	}{
		{"default", loop.Origin{}, loop.Origin{Kind: loop.OriginHTTP}},
		{"mcp", loop.Origin{Kind: loop.OriginMCP, Server: "git", RequestID: "7"}, loop.Origin{Kind: loop.OriginMCP, Server: "git", RequestID: "7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, store := newEngine(t, loop.Options{Sampler: offlineSampler(t), Tools: reg})
			id := start(t, e, loop.Spec{Messages: prompt("Say hi."), Origin: tt.in})
			evs := collect(t, store, id)
			var started struct {
				Origin loop.Origin `json:"origin"`
			}
			if err := json.Unmarshal(evs[0].Raw, &started); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, started.Origin); diff != "" {
				t.Errorf("loop.started origin (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, snapshot(t, store, id).Origin); diff != "" {
				t.Errorf("snapshot origin (-want +got):\n%s", diff)
			}
		})
	}
}
