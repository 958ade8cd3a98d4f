package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEventStoreBounded: a session that stays open for many calls keeps
// the events of its latest streams only, and a forgotten stream reads as
// purged; the latest streams replay whole.
func TestEventStoreBounded(t *testing.T) {
	ctx := context.Background()
	s := newEventStore()
	const calls = 10 * maxSessionStreams
	for i := range calls {
		stream := fmt.Sprint(i)
		if err := s.Open(ctx, "s1", stream); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := s.Append(ctx, "s1", stream, []byte(fmt.Sprintf("event %d.%d", i, j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(s.sessions["s1"].streams); n != maxSessionStreams {
		t.Errorf("the session keeps %d streams, want %d", n, maxSessionStreams)
	}
	for _, err := range s.After(ctx, "s1", "0", -1) {
		if !errors.Is(err, mcp.ErrEventsPurged) {
			t.Errorf("the first stream: %v, want ErrEventsPurged", err)
		}
	}
	var got []string
	for d, err := range s.After(ctx, "s1", fmt.Sprint(calls-1), 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(d))
	}
	if want := []string{fmt.Sprintf("event %d.1", calls-1), fmt.Sprintf("event %d.2", calls-1)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the last stream after its first event: %q, want %q", got, want)
	}
	// Bytes bound it too: one large stream pushes the others out, not itself.
	big := make([]byte, maxSessionBytes/2+1)
	for i := range 3 {
		if err := s.Append(ctx, "s1", "big", big); err != nil {
			t.Fatal(err)
		}
		if i > 0 && len(s.sessions["s1"].streams) != 1 {
			t.Errorf("after %d large events the session keeps %d streams, want only the large one", i+1, len(s.sessions["s1"].streams))
		}
	}
	if err := s.SessionClosed(ctx, "s1"); err != nil || len(s.sessions) != 0 {
		t.Errorf("SessionClosed: %v, %d sessions left", err, len(s.sessions))
	}
}
