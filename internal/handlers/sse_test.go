package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLongReplayArrivesWhole: a replay many times larger than one write
// batch reaches the client complete and in order, each event's data intact.
func TestLongReplayArrivesWhole(t *testing.T) {
	s := startStackWith(t, stackOptions{})
	const n = 300 // of 1 KiB each: about ten batches
	if err := s.runs.Create(context.Background(), "loop_long", json.RawMessage(`{"status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	want := make([]loopEvent, n)
	for i := range n {
		data := fmt.Sprintf(`{"i":%d,"pad":%q}`, i+1, strings.Repeat("x", 1<<10))
		if _, err := s.runs.Append(context.Background(), "loop_long", "tool.completed", json.RawMessage(data), i == n-1); err != nil {
			t.Fatal(err)
		}
		want[i] = loopEvent{ID: fmt.Sprint(i + 1), Name: "tool.completed", Data: data}
	}
	resp, err := http.Get(s.url + "/v1/loops/loop_long/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if diff := cmp.Diff(want, readEvents(t, resp.Body)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
