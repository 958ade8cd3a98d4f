package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestContractFloorAnswersAsSampled: for the bench's bodies the contract
// floor answers what sampled answers (its body but for durationMs, its
// headers), and refuses what sampled refuses; otherwise its cost would
// not be the contract's.
func TestContractFloorAnswersAsSampled(t *testing.T) {
	up := httptest.NewServer(newFakeUpstream(0))
	defer up.Close()
	a, err := newSampled(t.Context(), up.URL, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sampled := httptest.NewServer(a.Handler)
	defer sampled.Close()
	contract := httptest.NewServer(newContractFloor(up.URL+"/v1/chat/completions", io.Discard))
	defer contract.Close()

	modes, err := sideModes()
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{"unknown member": `{"prompt":"x","bogus":1}`, "no prompt": `{"maxTokens":5}`}
	for _, m := range modes {
		bodies[m.name] = string(m.body)
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			want, wantHeader := postSample(t, sampled.URL, body)
			got, gotHeader := postSample(t, contract.URL, body)
			if want.status != got.status {
				t.Fatalf("status %d, sampled's %d (%s)", got.status, want.status, got.body)
			}
			if want.status != http.StatusOK {
				return
			}
			if diff := cmp.Diff(want.body, got.body); diff != "" {
				t.Errorf("answer (-sampled +contract floor):\n%s", diff)
			}
			for _, h := range []string{"Content-Type", "Sampled-Cost-Usd"} {
				if wantHeader.Get(h) != gotHeader.Get(h) {
					t.Errorf("%s %q, sampled's %q", h, gotHeader.Get(h), wantHeader.Get(h))
				}
			}
			if gotHeader.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
		})
	}
}

type answer struct {
	status int
	body   map[string]any
}

// postSample posts body to base's /v1/sample and reads the answer, less its
// durationMs.
func postSample(t *testing.T, base, body string) (answer, http.Header) {
	t.Helper()
	resp, err := http.Post(base+"/v1/sample", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
		t.Fatal(err)
	}
	delete(a.body, "durationMs")
	return a, resp.Header
}

// TestContractOnSampledsSide: with contract set, the gateway started on
// sampled's side is the contract floor, which serves every path, where
// sampled has no /v1/nope.
func TestContractOnSampledsSide(t *testing.T) {
	fake, err := startChild(t.Context(), subFake)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.stop()
	modes, err := sideModes()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		contract bool
		want     int
	}{{true, http.StatusOK}, {false, http.StatusNotFound}} {
		g, err := startGateway(t.Context(), sideSampled, fake.url, tt.contract)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(g.url+"/v1/nope", "application/json", strings.NewReader(string(modes[0].body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		g.stop()
		if resp.StatusCode != tt.want {
			t.Errorf("contract %v: status %d, want %d", tt.contract, resp.StatusCode, tt.want)
		}
	}
}
