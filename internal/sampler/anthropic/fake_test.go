package anthropic

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sampled/sampled/internal/testing/golden"

	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/anthropic/requests")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testKey is the API key the tests configure; it must never show in errors.
const testKey = "sk-ant-api03-TEST-0123456789abcdefghij-SECRET"

// reply is one canned answer of the fake upstream.
type reply struct {
	// status 0 means 200.
	status int
	// file is a wire example under testdata/anthropic/replies; "$API_KEY"
	// in it is replaced by the key the request carried.
	file string
	// body is used when file is empty.
	body   string
	header map[string]string
	// block makes the handler answer nothing until the client goes away.
	block bool
	// stream says the request must ask for a stream ("stream": true); a
	// file ending in .sse is sent as text/event-stream, event by event.
	stream bool
	// hold keeps the stream open once its events are sent, until the
	// client goes away.
	hold bool
}

// seen is one request the fake received.
type seen struct {
	method, path string
	header       http.Header
	body         []byte
}

// fake is an Anthropic Messages API upstream replaying canned answers.
type fake struct {
	t   *testing.T
	srv *httptest.Server
	// arrived receives a value when a blocking reply starts waiting;
	// gone when the fake saw the client go away.
	arrived, gone chan struct{}

	mu      sync.Mutex
	replies []reply
	got     []seen
}

func newFake(t *testing.T, replies ...reply) *fake {
	t.Helper()
	f := &fake{t: t, replies: replies, arrived: make(chan struct{}, 1), gone: make(chan struct{}, 1)}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("fake: reading body: %v", err)
	}
	f.mu.Lock()
	f.got = append(f.got, seen{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("fake: no reply left for request %d", len(f.got))
		http.Error(w, `{"type":"error","error":{"type":"api_error","message":"fake: no reply left"}}`, http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()

	var head struct {
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.Stream != rep.stream {
		f.t.Errorf("fake: request %s has stream %v, want %v", body, head.Stream, rep.stream)
	}

	if rep.block {
		f.arrived <- struct{}{}
		<-r.Context().Done()
		f.gone <- struct{}{}
		return
	}
	out := []byte(rep.body)
	if rep.file != "" {
		out, err = os.ReadFile(filepath.Join("testdata", "anthropic", "replies", rep.file))
		if err != nil {
			f.t.Errorf("fake: %v", err)
		}
	}
	out = bytes.ReplaceAll(out, []byte("$API_KEY"), []byte(r.Header.Get("X-Api-Key")))
	if strings.HasSuffix(rep.file, ".sse") {
		f.replay(w, r, rep, out)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// replay sends a recorded stream as a server does: each event as it
// comes, flushed. With hold set the stream stays open afterwards until the
// client goes away.
func (f *fake) replay(w http.ResponseWriter, r *http.Request, rep reply, out []byte) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for event := range strings.SplitAfterSeq(string(out), "\n\n") {
		if _, err := io.WriteString(w, event); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	if rep.hold {
		f.arrived <- struct{}{}
		<-r.Context().Done()
		f.gone <- struct{}{}
	}
}

// requests returns what the fake received so far.
func (f *fake) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.got...)
}

// provider returns a Provider talking to the fake.
func (f *fake) provider() *Provider {
	return New(Options{BaseURL: f.srv.URL, APIKey: testKey, HTTPClient: f.srv.Client()})
}

// checkHeaders asserts that every request was a Messages API call carrying
// the key and the API version.
func checkHeaders(t *testing.T, got []seen) {
	t.Helper()
	for i, r := range got {
		if r.method != http.MethodPost || r.path != "/v1/messages" {
			t.Errorf("request %d: %s %s, want POST /v1/messages", i, r.method, r.path)
		}
		if k := r.header.Get("X-Api-Key"); k != testKey {
			t.Errorf("request %d: x-api-key = %q, want the configured key", i, k)
		}
		if v := r.header.Get("Anthropic-Version"); v != "2023-06-01" {
			t.Errorf("request %d: anthropic-version = %q, want 2023-06-01", i, v)
		}
	}
}

// checkGolden compares a request body with
// testdata/anthropic/requests/<name>.json, pretty-printed with sorted keys;
// -update rewrites the file.
func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	golden.JSON(t, filepath.Join("testdata", "anthropic", "requests", name+".json"), body, *update)
}

// decode parses a request body for assertions beyond the golden.
func decode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// noKey fails if the API key shows in any of texts.
func noKey(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, testKey) {
			t.Errorf("the API key leaks into %q", s)
		}
	}
}
