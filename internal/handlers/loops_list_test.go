package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
)

// TestListLoops starts runs from HTTP and from two MCP servers, and pages
// through GET /v1/loops with and without filters: newest first, every
// matching run once.
func TestListLoops(t *testing.T) {
	s := startStack(t, 0)
	origins := []loop.Origin{
		{Kind: loop.OriginHTTP},
		{Kind: loop.OriginMCP, Server: "git", RequestID: "1"},
		{Kind: loop.OriginHTTP},
		{Kind: loop.OriginMCP, Server: "docs", RequestID: "s-2"},
		{Kind: loop.OriginMCP, Server: "git", RequestID: "3"},
	}
	var ids []string // in creation order
	for _, o := range origins {
		id, err := s.loops.Start(context.Background(), loop.Spec{Origin: o,
			Messages: []sampler.Message{sampler.UserMessage(sampler.TextBlock("Say hi."))}})
		if err != nil {
			t.Fatal(err)
		}
		waitLoopFinished(t, s.srv, id)
		ids = append(ids, id)
	}
	type page struct {
		Loops []struct {
			ID     string      `json:"id"`
			Origin loop.Origin `json:"origin"`
			Status string      `json:"status"`
			Links  loopLinks   `json:"links"`
		} `json:"loops"`
		Next string `json:"next"`
	}
	list := func(t *testing.T, q url.Values) []string {
		t.Helper()
		var got []string
		for range 10 {
			resp, err := http.Get(s.url + "/v1/loops?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			var p page
			err = json.NewDecoder(resp.Body).Decode(&p)
			resp.Body.Close()
			if resp.StatusCode != 200 || err != nil {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			for _, l := range p.Loops {
				if l.Links.Self != "/v1/loops/"+l.ID || l.Status != loop.StatusCompleted {
					t.Errorf("run %+v", l)
				}
				got = append(got, l.ID)
			}
			if p.Next == "" {
				return got
			}
			q.Set("cursor", p.Next)
		}
		t.Fatal("no last page")
		return nil
	}
	tests := []struct {
		name  string
		query url.Values
		want  []int // indexes into ids
	}{
		{"all", url.Values{}, []int{4, 3, 2, 1, 0}},
		{"pages of two", url.Values{"limit": {"2"}}, []int{4, 3, 2, 1, 0}},
		{"http", url.Values{"origin": {"http"}, "limit": {"1"}}, []int{2, 0}},
		{"one server", url.Values{"origin": {"git"}}, []int{4, 1}},
		{"status", url.Values{"status": {"completed"}, "origin": {"docs"}}, []int{3}},
		{"no match", url.Values{"status": {"running"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, i := range tt.want {
				want = append(want, ids[i])
			}
			if diff := cmp.Diff(want, list(t, tt.query)); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
}
