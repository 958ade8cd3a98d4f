package ollama

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
)

var update = flag.Bool("update", false, "rewrite the golden request bodies in testdata/ollama/requests")

// reply is one canned answer of the fake upstream.
type reply struct {
	// status 0 means 200.
	status int
	// file names the body under testdata/ollama/replies; body is used when
	// file is empty.
	file       string
	body       string
	retryAfter string
	// stream says the request must ask for a stream ("stream": true); a
	// file ending in .ndjson is sent as application/x-ndjson, line by line.
	stream bool
	// hold keeps the stream open once its lines are sent, until the client
	// goes away.
	hold bool
}

// fakeOllama is an httptest Ollama that answers POST /api/chat with canned
// replies, in order, and records the request bodies.
type fakeOllama struct {
	t   *testing.T
	srv *httptest.Server
	// arrived receives a value when a held stream has sent its lines;
	// gone when the fake then saw the client go away.
	arrived, gone chan struct{}

	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
}

func newFake(t *testing.T, replies ...reply) *fakeOllama {
	t.Helper()
	f := &fakeOllama{t: t, replies: replies, arrived: make(chan struct{}, 1), gone: make(chan struct{}, 1)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOllama) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/chat" {
		f.t.Errorf("fake ollama: got %s %s, want POST /api/chat", r.Method, r.URL.Path)
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.t.Errorf("fake ollama: Content-Type %q, want application/json", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("fake ollama: read body: %v", err)
		return
	}
	var head struct {
		Stream *bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.Stream == nil {
		f.t.Errorf("fake ollama: body must be JSON with stream, got %s", body)
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("fake ollama: unexpected request %d", len(f.bodies))
		http.Error(w, `{"error":"no reply left"}`, http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()
	if head.Stream != nil && *head.Stream != rep.stream {
		f.t.Errorf("fake ollama: request has stream:%v, want %v", *head.Stream, rep.stream)
	}

	data := []byte(rep.body)
	if rep.file != "" {
		data = readReply(f.t, rep.file)
	}
	if strings.HasSuffix(rep.file, ".ndjson") {
		f.replay(w, r, rep, data)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// replay sends a recorded stream as Ollama does: each line as it comes,
// flushed. With hold set the stream stays open afterwards until the client
// goes away.
func (f *fakeOllama) replay(w http.ResponseWriter, r *http.Request, rep reply, data []byte) {
	if r.Header.Get("Accept") != "application/x-ndjson" {
		f.t.Errorf("fake ollama: a stream asked with Accept %q", r.Header.Get("Accept"))
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for line := range bytes.Lines(data) {
		if _, err := w.Write(line); err != nil {
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

// requests returns the bodies received so far.
func (f *fakeOllama) requests() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

// provider returns a Provider talking to the fake; its idle connections
// are closed when the test ends.
func (f *fakeOllama) provider(t *testing.T) *Provider {
	t.Helper()
	return newProvider(t, Options{BaseURL: f.srv.URL})
}

func newProvider(t *testing.T, o Options) *Provider {
	t.Helper()
	p := New(o)
	t.Cleanup(p.client.CloseIdleConnections)
	return p
}

func readReply(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ollama", "replies", name))
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return data
}

// checkGolden compares a request body with testdata/ollama/requests/<name>.json,
// or rewrites that file under -update.
func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	golden.JSON(t, filepath.Join("testdata", "ollama", "requests", name+".json"), body, *update)
}

// wireBody is the part of a request body the tests look into.
type wireBody struct {
	Messages []struct {
		Role      string   `json:"role"`
		Content   string   `json:"content"`
		Images    []string `json:"images"`
		ToolName  string   `json:"tool_name"`
		ToolCalls []struct {
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools *[]struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Format  json.RawMessage `json:"format"`
	Options map[string]any  `json:"options"`
}

func decodeBody(t *testing.T, body []byte) wireBody {
	t.Helper()
	var b wireBody
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("decode request body: %v", err)
	}
	return b
}

// toolNames returns the names of the tools a body declares, nil when it
// has no "tools" member.
func (b wireBody) toolNames() []string {
	if b.Tools == nil {
		return nil
	}
	names := []string{}
	for _, t := range *b.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// roles returns the roles of a body's messages.
func (b wireBody) roles() []string {
	var roles []string
	for _, m := range b.Messages {
		roles = append(roles, m.Role)
	}
	return roles
}
