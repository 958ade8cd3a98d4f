package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/chat"
)

// TestStream runs the whole streaming measurement, tiny, with every
// program in its own process, and checks that it prints every row with a
// value in every measured cell, the five targets and the CPU profiles. It
// asserts no timing.
func TestStream(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("the measurement reads /proc")
	}
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	var out bytes.Buffer
	o := streamOptions{rounds: 1, chunks: 8, gap: time.Millisecond, seq: 3, c: 4, d: 500 * time.Millisecond,
		streams: 20, hold: 50 * time.Millisecond, cpuprofile: prof}
	if err := runStream(t.Context(), o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	rows := map[string][]string{}
	section := ""
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			section = ""
		case len(f) > 1 && f[0] == "side" && (f[1] == "c=1" || f[1] == "open"):
			section = f[1]
		case section == "c=1" && len(f) > 1:
			rows[f[0]] = f[1:]
		case section == "open" && len(f) > 1:
			rows["memory "+f[0]] = f[1:]
		}
	}
	want := map[string]int{ // cells; direct is measured at c=1 only
		"direct": 3, "floor": 10, "sampled": 10, "sampled/floor": 10,
		"memory floor": 3, "memory sampled": 3, "memory sampled/floor": 2,
	}
	for row, n := range want {
		cells := rows[row]
		if measured := slicesWithout(cells, "—", "MB"); len(measured) != n {
			t.Errorf("row %q: cells %q, want %d measured", row, cells, n)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("rows %v, want those of %v", rows, want)
	}
	for _, target := range []string{"c=1 first event <=", "c=1 gap p99 <=", "CPU/chunk <=", "20 streams: sampled peak RSS <=",
		"not streamed CPU/request <="} {
		i := strings.Index(out.String(), "  "+target)
		if i < 0 {
			t.Errorf("no target %q", target)
			continue
		}
		line, _, _ := strings.Cut(out.String()[i:], "\n")
		if !strings.HasSuffix(line, "  met") && !strings.HasSuffix(line, "NOT met") {
			t.Errorf("target line %q says neither met nor NOT met", line)
		}
	}
	for _, side := range []string{sideFloor, sideSampled} {
		for _, phase := range []string{"stream", "chat"} {
			b, err := os.ReadFile(profilePath(prof, side, phase))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Errorf("%s %s: profile is not gzipped (%d bytes)", side, phase, len(b))
			}
		}
	}
}

// events reads an event stream's data lines.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := eventData([]byte(sc.Text() + "\n")); ok {
			out = append(out, string(d))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStreamFake: a streamed request gets one chunk per fragment, the
// first with the role, then the finish chunk, the usage chunk only when
// asked for, and [DONE], gap apart; a request not streamed gets -side's
// whole answer; GET /inflight counts what it holds.
func TestStreamFake(t *testing.T) {
	srv := httptest.NewServer(newStreamFake(4, 20*time.Millisecond))
	defer srv.Close()
	for _, usage := range []bool{false, true} {
		req := chat.Request{Model: streamModel, Messages: []chat.Message{{Role: chat.RoleUser, Content: chat.Text("hi")}}, Stream: true}
		if usage {
			req.StreamOptions = &chat.StreamOptions{IncludeUsage: true}
		}
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got := events(t, resp.Body)
		resp.Body.Close()
		if took := time.Since(start); took < 3*20*time.Millisecond {
			t.Errorf("usage %v: the stream took %s, want at least three gaps", usage, took)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("Content-Type %q", ct)
		}
		want := 4 + 1 + 1 // fragments, finish, [DONE]
		if usage {
			want++
		}
		if len(got) != want || got[len(got)-1] != "[DONE]" {
			t.Fatalf("usage %v: events %q, want %d ending with [DONE]", usage, got, want)
		}
		var text strings.Builder
		for i, e := range got[:len(got)-1] {
			var c chat.Chunk
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if c.Object != chat.ObjectChunk || c.Model != streamModel {
				t.Errorf("event %d: object %q, model %q", i, c.Object, c.Model)
			}
			switch {
			case i < 4:
				if len(c.Choices) != 1 || c.Choices[0].Delta.Content == nil || c.Choices[0].FinishReason != nil {
					t.Fatalf("event %d: %s, want a fragment", i, e)
				}
				if role := c.Choices[0].Delta.Role; (i == 0) != (role == chat.RoleAssistant) {
					t.Errorf("event %d: role %q", i, role)
				}
				text.WriteString(*c.Choices[0].Delta.Content)
			case i == 4:
				if len(c.Choices) != 1 || c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != chat.FinishStop {
					t.Errorf("event %d: %s, want the finish", i, e)
				}
			default:
				if len(c.Choices) != 0 || c.Usage == nil || c.Usage.CompletionTokens != 4 {
					t.Errorf("event %d: %s, want the usage", i, e)
				}
			}
		}
		if diff := cmp.Diff(fakeAnswer(4), text.String()); diff != "" {
			t.Errorf("the fragments (-want +got):\n%s", diff)
		}
	}

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if diff := cmp.Diff(string(plainCompletion), string(b)); diff != "" {
		t.Errorf("not streamed (-want +got):\n%s", diff)
	}
	if n, err := inflight(http.DefaultClient, srv.URL); err != nil || n != 0 {
		t.Errorf("inflight %d, %v; want 0", n, err)
	}
}

// TestStreamFloor: the floor sends the request on as it came and copies
// the upstream's event stream byte for byte; not streamed, it passes the
// completion through its types; a body that is not JSON is a 400, an
// upstream failure a 502.
func TestStreamFloor(t *testing.T) {
	var sent atomic.Value
	var status atomic.Int64
	fake := newStreamFake(3, time.Millisecond)
	var direct atomic.Value // the fake's last answer as it sent it
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
		rec := httptest.NewRecorder()
		fake.ServeHTTP(rec, r)
		direct.Store(rec.Body.String())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer up.Close()
	gw := httptest.NewServer(newStreamFloor(up.URL + "/v1/chat/completions"))
	defer gw.Close()

	streamed, err := streamBody(true)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := streamBody(false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		body       string
		upstream   int
		wantStatus int
		wantBody   func() string
	}{
		{name: "streamed", body: string(streamed), wantStatus: http.StatusOK, wantBody: func() string { return direct.Load().(string) }},
		{name: "not streamed", body: string(whole), wantStatus: http.StatusOK, wantBody: func() string {
			var c chat.Response
			if err := json.Unmarshal(plainCompletion, &c); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(c)
			return string(b) + "\n"
		}},
		{name: "not JSON", body: `{"model":`, wantStatus: http.StatusBadRequest},
		{name: "upstream fails", body: string(streamed), upstream: http.StatusTooManyRequests, wantStatus: http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent.Store("")
			status.Store(int64(tt.upstream))
			resp, err := http.Post(gw.URL+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
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
			if tt.wantStatus == http.StatusBadRequest {
				return
			}
			if diff := cmp.Diff(tt.body, sent.Load().(string)); diff != "" {
				t.Errorf("sent upstream (-want +got):\n%s", diff)
			}
			if tt.wantBody != nil {
				if diff := cmp.Diff(tt.wantBody(), string(b)); diff != "" {
					t.Errorf("answer (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestStreamOnce: the client times the first event and each gap after it,
// counts the chunk events, gathers their content, and fails a stream that
// ends without [DONE] or an answer that is not a 200.
func TestStreamOnce(t *testing.T) {
	srv := httptest.NewServer(newStreamFake(5, 10*time.Millisecond))
	defer srv.Close()
	body, err := streamBody(true)
	if err != nil {
		t.Fatal(err)
	}
	c := streamClient(1, 10*time.Second)
	tr, err := streamOnce(c, srv.URL+"/v1/chat/completions", body, true)
	if err != nil {
		t.Fatal(err)
	}
	if tr.events != 7 || len(tr.gaps) != 6 || tr.text != fakeAnswer(5) {
		t.Errorf("events %d, gaps %d, text %q; want 7 (5 fragments, finish, usage), 6, %q", tr.events, len(tr.gaps), tr.text, fakeAnswer(5))
	}
	if tr.ttfb <= 0 || tr.total < tr.ttfb+4*10*time.Millisecond {
		t.Errorf("first event %s, total %s; want the total four gaps past the first event", tr.ttfb, tr.total)
	}
	var sum time.Duration
	for _, g := range tr.gaps {
		sum += g
	}
	if sum < 4*10*time.Millisecond {
		t.Errorf("gaps %v sum to %s, want at least four gaps", tr.gaps, sum)
	}

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "data: {}\n\n")
	}))
	defer cut.Close()
	if _, err := streamOnce(c, cut.URL, body, false); err == nil || !strings.Contains(err.Error(), "after 1 events") {
		t.Errorf("a stream without [DONE]: %v", err)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	if _, err := streamOnce(c, failing.URL, body, false); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a 503: %v", err)
	}
}

// TestInterleaveStreams: one stream to each target in turn, and a target
// whose answer is not the fake's fails the run, naming it.
func TestInterleaveStreams(t *testing.T) {
	var (
		mu      sync.Mutex
		order   []string
		targets []target
	)
	for _, name := range []string{"a", "b"} {
		fake := newStreamFake(3, time.Millisecond)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			fake.ServeHTTP(w, r)
		}))
		defer srv.Close()
		targets = append(targets, target{URL: srv.URL, Body: []byte(`{"stream":true}`)})
	}
	res, err := interleaveStreams(t.Context(), targets, 3, 3, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Fields("a b b a a b"), order); diff != "" {
		t.Errorf("streams in the order served (-want +got):\n%s", diff)
	}
	for i, r := range res {
		if r.Streams != 3 || r.Events != 3*4 || r.TTFBP50Ns <= 0 || r.GapP99Ns < r.GapP50Ns || r.TotalP50Ns < r.TTFBP50Ns {
			t.Errorf("target %d: %+v", i, r)
		}
	}
	if _, err := interleaveStreams(t.Context(), targets, 1, 4, 10*time.Second); err == nil || !strings.Contains(err.Error(), targets[0].URL) {
		t.Errorf("a short answer: %v; want an error naming the target", err)
	}
}

// TestStreamLoad: every stream counts its events, and a stream with fewer
// than the chunks asked for is a failure.
func TestStreamLoad(t *testing.T) {
	srv := httptest.NewServer(newStreamFake(3, time.Millisecond))
	defer srv.Close()
	body := []byte(`{"stream":true}`)
	res := streamLoad(t.Context(), srv.URL, body, 3, 2, 6, 0, 10*time.Second)
	if res.Streams != 6 || res.Failed != 0 || res.Events != 6*4 || res.TTFBP50Ns <= 0 || res.GapP99Ns <= 0 {
		t.Errorf("%+v; want 6 streams of 4 events, timed", res)
	}
	res = streamLoad(t.Context(), srv.URL, body, 5, 2, 4, 0, 10*time.Second)
	if res.Streams != 0 || res.Failed != 4 || !strings.Contains(res.FirstErr, "4 events, want at least 5") {
		t.Errorf("%+v; want 4 failures for too few events", res)
	}
}

func TestEventData(t *testing.T) {
	tests := []struct {
		line, want string
		ok         bool
	}{
		{"data: {\"a\":1}\n", `{"a":1}`, true},
		{"data:[DONE]\r\n", "[DONE]", true},
		{"data:  two spaces\n", " two spaces", true},
		{": comment\n", "", false},
		{"event: x\n", "", false},
		{"\n", "", false},
	}
	for _, tt := range tests {
		got, ok := eventData([]byte(tt.line))
		if ok != tt.ok || string(got) != tt.want {
			t.Errorf("eventData(%q) = %q, %v; want %q, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFakeAnswer(t *testing.T) {
	if got := fakeAnswer(3); got != "Paris is the" {
		t.Errorf("fakeAnswer(3) = %q", got)
	}
	if n := len(strings.Fields(fakeAnswer(3 * len(fakeWords)))); n != 3*len(fakeWords) {
		t.Errorf("%d words, want one a chunk", n)
	}
}
