package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMain lets the test binary play the side-by-side measurement's child
// processes, which re-run the binary with a sub-command.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && isSideChild(os.Args[1]) {
		if err := run(context.Background(), os.Args, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSideBySide runs the whole side-by-side measurement, small, with every
// program in its own process, and checks that it prints every row with a
// value in every measured cell and writes the CPU profiles. It asserts no
// timing.
func TestSideBySide(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("the measurement reads /proc")
	}
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	var out bytes.Buffer
	o := sideOptions{rounds: 2, n: 20, c: 4, d: 150 * time.Millisecond, inflight: 20, delay: 300 * time.Millisecond, cpuprofile: prof}
	if err := runSide(t.Context(), o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	// The rows of the two tables: each starts after its header line and
	// ends at a blank line.
	rows := map[string][]string{}
	section := ""
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			section = ""
		case len(f) > 1 && (f[0] == "mode" && f[1] == "side" || f[0] == "side" && f[1] == "in"):
			section = f[0]
		case section == "mode" && len(f) > 2:
			rows[f[0]+" "+f[1]] = f[2:]
		case section == "side" && len(f) > 1:
			rows["memory "+f[0]] = f[1:]
		}
	}
	want := map[string]int{ // cells; direct is not measured at c=64
		"plain direct": 2, "plain floor": 6, "plain sampled": 6, "plain sampled/floor": 6,
		"schema direct": 2, "schema floor": 6, "schema sampled": 6, "schema sampled/floor": 6,
		"memory floor": 3, "memory sampled": 3, "memory sampled/floor": 2,
	}
	for row, n := range want {
		cells := rows[row]
		measured := slicesWithout(cells, "—", "MB")
		if len(measured) != n {
			t.Errorf("row %q: cells %q, want %d measured", row, cells, n)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("rows %v, want those of %v", rows, want)
	}
	if n := strings.Count(out.String(), "  met") + strings.Count(out.String(), "NOT met"); n != 5 {
		t.Errorf("%d targets reported, want 5", n)
	}
	for _, side := range []string{sideFloor, sideSampled} {
		for _, mode := range []string{"plain", "schema"} {
			b, err := os.ReadFile(profilePath(prof, side, mode))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Errorf("%s %s: profile is not gzipped (%d bytes)", side, mode, len(b))
			}
		}
	}
}

func slicesWithout(s []string, drop ...string) []string {
	var out []string
	for _, v := range s {
		keep := true
		for _, d := range drop {
			keep = keep && v != d
		}
		if keep {
			out = append(out, v)
		}
	}
	return out
}

// TestFloorGateway: the floor maps a sampling body to one chat completion,
// asking for JSON output in schema mode, and the answer back to its text
// (and parsed JSON); a body that is not JSON is a 400, an upstream failure
// a 502.
func TestFloorGateway(t *testing.T) {
	var sent atomic.Value
	var status atomic.Int64
	fake := newFakeUpstream(0)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		sent.Store(string(b))
		if s := status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		fake.ServeHTTP(w, r)
	}))
	defer up.Close()
	gw := httptest.NewServer(newFloorGateway(up.URL + "/v1/chat/completions"))
	defer gw.Close()

	tests := []struct {
		name       string
		body       string
		upstream   int
		wantStatus int
		wantSent   string
		wantBody   string
	}{
		{
			name:       "plain",
			body:       `{"prompt":"What is the capital of France?","maxTokens":100}`,
			wantStatus: http.StatusOK,
			wantSent:   `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of France?"}],"max_completion_tokens":100}`,
			wantBody:   `{"text":"Paris is the capital of France."}` + "\n",
		},
		{
			name:       "schema",
			body:       `{"prompt":"Describe Paris.","schema":{"type":"object"}}`,
			wantStatus: http.StatusOK,
			wantSent: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Describe Paris."}],` +
				`"response_format":{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"}}}}`,
			wantBody: `{"text":"{\"city\":\"Paris\",\"country\":\"France\",\"population\":2102650}",` +
				`"parsed":{"city":"Paris","country":"France","population":2102650}}` + "\n",
		},
		{name: "not JSON", body: `{"prompt":`, wantStatus: http.StatusBadRequest},
		{name: "upstream fails", body: `{"prompt":"x"}`, upstream: http.StatusTooManyRequests, wantStatus: http.StatusBadGateway,
			wantSent: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent.Store("")
			status.Store(int64(tt.upstream))
			resp, err := http.Post(gw.URL+"/v1/sample", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantSent, sent.Load().(string)); diff != "" {
				t.Errorf("sent upstream (-want +got):\n%s", diff)
			}
			if tt.wantBody != "" {
				if diff := cmp.Diff(tt.wantBody, string(b)); diff != "" {
					t.Errorf("answer (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestSideModes: what the direct calls send is what the floor sends for
// the same body, and the fake answers the schema mode with JSON that has
// the schema's three required properties.
func TestSideModes(t *testing.T) {
	modes, err := sideModes()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range modes {
		names = append(names, m.name)
		var in floorRequest
		if err := json.Unmarshal(m.body, &in); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(chatFor(in))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(m.direct)); diff != "" {
			t.Errorf("%s direct body (-want +got):\n%s", m.name, diff)
		}
	}
	if diff := cmp.Diff([]string{"plain", "schema"}, names); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(sideSchema), &schema); err != nil {
		t.Fatal(err)
	}
	var cc floorCompletion
	if err := json.Unmarshal(schemaCompletion, &cc); err != nil {
		t.Fatal(err)
	}
	var answer map[string]any
	if err := json.Unmarshal([]byte(cc.Choices[0].Message.Content), &answer); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range schema.Required {
		if _, ok := answer[p]; ok {
			got = append(got, p)
		}
	}
	if diff := cmp.Diff([]string{"city", "country", "population"}, got); diff != "" {
		t.Errorf("required properties in the answer (-want +got):\n%s", diff)
	}
}

// TestLoad: the load runs exactly n calls when n bounds it, counts
// failures apart with the first error, and stops when d ends.
func TestLoad(t *testing.T) {
	var calls atomic.Int64
	res := load(t.Context(), 4, 50, 0, func() error {
		if calls.Add(1)%10 == 0 {
			return errors.New("tenth")
		}
		return nil
	})
	got := loadResult{OK: res.OK, Failed: res.Failed, FirstErr: res.FirstErr}
	if diff := cmp.Diff(loadResult{OK: 45, Failed: 5, FirstErr: "tenth"}, got, cmp.AllowUnexported(loadResult{})); diff != "" {
		t.Errorf("count-bound load (-want +got):\n%s", diff)
	}
	if calls.Load() != 50 {
		t.Errorf("%d calls, want 50", calls.Load())
	}
	if res.P50Ns <= 0 || res.P99Ns < res.P50Ns {
		t.Errorf("p50 %d ns, p99 %d ns: want 0 < p50 <= p99", res.P50Ns, res.P99Ns)
	}

	ended := make(chan loadResult, 1)
	go func() {
		ended <- load(t.Context(), 2, 0, time.Millisecond, func() error { return nil })
	}()
	if r := <-ended; r.OK == 0 || r.Failed != 0 {
		t.Errorf("time-bound load: %+v, want calls and no failure", r)
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{
			name: "plain name",
			stat: "4242 (sb) S 1 4242 4242 0 -1 4194560 1131 0 0 0 250 37 0 0 20 0 6 0 12345 1265131520 5120 18446744073709551615",
			want: 2870 * time.Millisecond,
		},
		{
			name: "name with spaces and parentheses",
			stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1 1",
			want: 70 * time.Millisecond,
		},
		{name: "cut short", stat: "7 (sb) R 1 7 7", wantErr: true},
		{name: "no name", stat: "7 sb R 1 7 7 0 -1 0 0 0 0 0 3 4", wantErr: true},
		{name: "not a number", stat: "7 (sb) R 1 7 7 0 -1 0 0 0 0 0 x 4 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.stat))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CPU time (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStatusMem(t *testing.T) {
	tests := []struct {
		name     string
		status   string
		rss, hwm int64
		wantErr  bool
	}{
		{
			name:   "both",
			status: "Name:\tsb\nVmPeak:\t 1300000 kB\nVmHWM:\t   30000 kB\nVmRSS:\t   25000 kB\nThreads:\t6\n",
			rss:    25000 << 10, hwm: 30000 << 10,
		},
		{name: "no HWM", status: "Name:\tsb\nVmRSS:\t   25000 kB\n", wantErr: true},
		{name: "bad number", status: "VmHWM:\t x kB\nVmRSS:\t 1 kB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rss, hwm, err := parseStatusMem([]byte(tt.status))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff([2]int64{tt.rss, tt.hwm}, [2]int64{rss, hwm}); diff != "" {
				t.Errorf("rss, hwm (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, median(tt.in)); diff != "" {
			t.Errorf("median(%v) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestPaired: a comparison pairs the values of one round, never a round's
// value with another's, and the sides take turns going first.
func TestPaired(t *testing.T) {
	s := samples{}
	for _, r := range [][2]float64{{20, 10}, {30, 10}, {100, 10}} { // ratios 2, 3, 10
		s.add("plain", "a", mCPU, r[0])
		s.add("plain", "b", mCPU, r[1])
	}
	s.add("plain", "a", mCPU, 1) // a round b did not finish: left out
	if got := s.paired("plain", mCPU, "a", "b", ratio); got != 3 {
		t.Errorf("paired ratio = %v, want 3 (the median of 2, 3 and 10)", got)
	}
	if got := s.paired("plain", mCPU, "a", "b", diff); got != 20 {
		t.Errorf("paired difference = %v, want 20", got)
	}
	if got := [][]string{inTurn(0, "a", "b"), inTurn(1, "a", "b"), inTurn(2, "a", "b")}; !cmp.Equal(got, [][]string{{"a", "b"}, {"b", "a"}, {"a", "b"}}) {
		t.Errorf("inTurn orders = %v, want a first, then b, then a", got)
	}
}
