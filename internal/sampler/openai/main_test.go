package openai

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sampled/sampled/internal/testing/golden"
	"github.com/sampled/sampled/internal/testing/openaispec"

	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden request bodies in testdata/openai/requests")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// checkSpec validates a JSON body against a component schema of OpenAI's
// OpenAPI description.
func checkSpec(t *testing.T, schema string, body []byte) { openaispec.Check(t, schema, body) }

// reply is one canned answer of the fake upstream.
type reply struct {
	// status 0 means 200.
	status int
	// file names a body under testdata/openai (e.g. "replies/text.json");
	// body is used when file is empty.
	file string
	body string
	// echo, if set, makes the body from the request.
	echo func(r *http.Request) string
	// header is sent with the reply.
	header map[string]string
	// compat marks a reply of an OpenAI-compatible server that is not held
	// to OpenAI's response schema.
	compat bool
	// hang holds the request open, without an answer, until the client
	// goes away.
	hang bool
	// stream marks a body that is an event stream: it is sent as
	// text/event-stream and its chunks are checked by
	// TestStreamRecordings, not as a whole reply.
	stream bool
	// hold keeps the reply open after its body until the client goes
	// away, as a stream whose next chunk is slow to come.
	hold bool
}

// request is one request the fake upstream received.
type request struct {
	path   string
	header http.Header
	body   []byte
}

// fakeUpstream is an httptest OpenAI that answers POST .../chat/completions
// with canned replies, in order, records the requests and validates every
// request body against CreateChatCompletionRequest and every whole 200
// reply against CreateChatCompletionResponse (TestStreamRecordings checks
// the chunks of streamed ones).
type fakeUpstream struct {
	t   *testing.T
	srv *httptest.Server
	// arrived receives one value when a hanging reply's request arrives;
	// gone when its handler saw the client leave.
	arrived chan struct{}
	gone    chan struct{}
	// stop releases hanging handlers when the test ends.
	stop chan struct{}

	mu       sync.Mutex
	replies  []reply
	requests []request
}

func newFake(t *testing.T, replies ...reply) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{t: t, replies: replies, arrived: make(chan struct{}, 1), gone: make(chan struct{}, 1),
		stop: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	// Cleanups run last-in first-out: hanging handlers are released before
	// Close waits for them.
	t.Cleanup(func() { close(f.stop) })
	return f
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("fake upstream: read body: %v", err)
		return
	}
	if r.Method != http.MethodPost || filepath.Base(r.URL.Path) != "completions" {
		f.t.Errorf("fake upstream: got %s %s, want POST .../chat/completions", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.t.Errorf("fake upstream: Content-Type %q, want application/json", ct)
	}
	checkSpec(f.t, "CreateChatCompletionRequest", body)
	f.mu.Lock()
	f.requests = append(f.requests, request{path: r.URL.Path, header: r.Header.Clone(), body: body})
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("fake upstream: unexpected request %s", body)
		http.Error(w, `{"error":{"message":"no reply left","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()

	if rep.hang {
		f.arrived <- struct{}{}
		f.waitGone(r)
		return
	}
	out := []byte(rep.body)
	switch {
	case rep.file != "":
		out = readTestdata(f.t, rep.file)
	case rep.echo != nil:
		out = []byte(rep.echo(r))
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	if status == http.StatusOK && !rep.compat && !rep.stream {
		checkSpec(f.t, "CreateChatCompletionResponse", out)
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		if rep.stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
	if rep.hold {
		_ = http.NewResponseController(w).Flush()
		f.arrived <- struct{}{}
		f.waitGone(r)
	}
}

// waitGone holds a request until its client goes away.
func (f *fakeUpstream) waitGone(r *http.Request) {
	select {
	case <-r.Context().Done():
		f.gone <- struct{}{}
	case <-f.stop:
		f.t.Errorf("fake upstream: the client never left a request held open")
	}
}

// bodies returns the request bodies received so far.
func (f *fakeUpstream) bodies() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]byte, len(f.requests))
	for i, r := range f.requests {
		out[i] = r.body
	}
	return out
}

// received returns the requests received so far.
func (f *fakeUpstream) received() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

// last returns the body of the last request, failing the test if there was
// none.
func (f *fakeUpstream) last(t *testing.T) []byte {
	t.Helper()
	b := f.bodies()
	if len(b) == 0 {
		t.Fatal("fake upstream received no request")
	}
	return b[len(b)-1]
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "openai", name))
	if err != nil {
		t.Fatalf("read testdata: %v", err)
	}
	return b
}

// checkGolden compares a request body, pretty-printed, with
// testdata/openai/requests/<name>.json, rewriting it under -update.
func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	golden.JSON(t, filepath.Join("testdata", "openai", "requests", name+".json"), body, *update)
}
