package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/offline"
)

// maxProblemBytes bounds a problem document: its texts are clipped and its
// errors counted (see writeProblem), whatever the request.
const maxProblemBytes = 64 << 10

// acceptedLoops is a Loops that accepts every spec without running it: the
// fuzz targets check the HTTP layer's decoding, not the engine.
type acceptedLoops struct{}

func (acceptedLoops) Start(context.Context, loop.Spec) (string, error) { return "run-1", nil }

// fuzzHandler is the HTTP layer on the offline provider's default model
// (its fault models, which answer 5xx on purpose, are left out), with a
// finished run "done" of three events in its store.
func fuzzHandler(f *testing.F) http.Handler {
	f.Helper()
	off := offline.New(nil)
	models := []sampler.Model{{Provider: off.Name(), Name: offline.ModelDefault}}
	svc, err := sampler.New(sampler.Options{Providers: []sampler.Provider{off}, Catalog: sampler.NewCatalog(models, "offline/default")})
	if err != nil {
		f.Fatal(err)
	}
	store := memory.New(memory.Options{})
	f.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	if err := store.Create(ctx, "done", json.RawMessage(`{"id":"done"}`)); err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"loop.started", "model.completed"} {
		if _, err := store.Append(ctx, "done", name, json.RawMessage(`{}`)); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := store.Finish(ctx, "done", "loop.completed", json.RawMessage(`{}`), json.RawMessage(`{"id":"done"}`)); err != nil {
		f.Fatal(err)
	}
	return New(Config{Sampler: svc, Loops: acceptedLoops{}, Runs: store})
}

// serve sends one request straight to h.
func serve(h http.Handler, method, target string, body []byte, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// checkAnswer fails unless w is a success in want or a client error
// answered with a problem of bounded size: never a 5xx, never a panic.
func checkAnswer(t *testing.T, in []byte, w *httptest.ResponseRecorder, want ...int) {
	t.Helper()
	for _, s := range want {
		if w.Code == s {
			return
		}
	}
	if w.Code < 400 || w.Code >= 500 {
		t.Fatalf("status %d for %q: %s", w.Code, in, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d with Content-Type %q", w.Code, ct)
	}
	if w.Body.Len() > maxProblemBytes {
		t.Fatalf("a problem of %d bytes for a body of %d", w.Body.Len(), len(in))
	}
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != w.Code || p.Type == "" {
		t.Fatalf("not a problem (%v): %s", err, w.Body)
	}
}

// seedBodies adds the official CreateMessageRequestParams examples, which
// the sample and loop bodies resemble.
func seedBodies(f *testing.F) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "reference", "mcp", "examples", "CreateMessageRequestParams", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no examples: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzSampleBody posts bodies to /v1/sample, answered by the offline
// provider.
func FuzzSampleBody(f *testing.F) {
	seedBodies(f)
	tool := `{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	for _, b := range []string{
		`{"prompt":"hi"}`,
		`{"prompt":"a","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":3}},"required":["n"]}}`,
		`{"prompt":"a","tools":[` + tool + `],"toolChoice":{"mode":"tool","name":"get_weather"}}`,
		`{"prompt":"a","tool_choice":{"mode":"none"},"maxTokens":5,"temperature":0.2,"stopSequences":["x"],"metadata":{"k":1}}`,
		`{"messages":[{"role":"user","content":{"type":"text","text":"w?"}},{"role":"assistant","content":{"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Oslo"}}},{"role":"user","content":[{"type":"tool_result","toolUseId":"c1","content":[]}]}],"tools":[` + tool + `]}`,
		`{"messages":[{"role":"user","content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}],"model":"offline/default"}`,
		`{"prompt":"a","modelPreferences":{"hints":[{"name":"default"}],"costPriority":2}}`,
		`{"prompt":"a","maxTokens":1.5}`,
		`{"prompt":`,
	} {
		f.Add([]byte(b))
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		w := serve(h, http.MethodPost, "/v1/sample", in, nil)
		checkAnswer(t, in, w, http.StatusOK)
	})
}

// FuzzLoopBody posts bodies to /v1/loops; the loop engine is left out.
func FuzzLoopBody(f *testing.F) {
	seedBodies(f)
	for _, b := range []string{
		`{"prompt":"add 2 and 3","allowedTools":["calc__add"],"maxIterations":3,"timeoutMs":1000}`,
		`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"toolChoice":{"mode":"tool","name":"calc__add"},"maxTokens":10,"temperature":1}`,
		`{"prompt":"a","timeoutMs":9223372036854775807}`,
		`{"prompt":"","model":"offline/default","modelPreferences":{"speedPriority":1}}`,
	} {
		f.Add([]byte(b))
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		w := serve(h, http.MethodPost, "/v1/loops", in, nil)
		checkAnswer(t, in, w, http.StatusCreated)
	})
}

// FuzzLastEventID resumes the event stream of a finished run of three
// events after a fuzzed Last-Event-ID header or lastEventId parameter: a
// 400 problem, or a stream of the events after it that ends with the
// terminal event (which a stream resumed beyond it gets too).
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "1", "3", "4", "-1", "abc", "+2", "01", "9223372036854775807", "9223372036854775808", " 1", "1e3", "0x1"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, id string, query bool) {
		target, header := "/v1/loops/done/events", map[string]string{"Last-Event-ID": id}
		if query {
			target, header = target+"?lastEventId="+url.QueryEscape(id), nil
		}
		w := serve(h, http.MethodGet, target, nil, header)
		checkAnswer(t, []byte(id), w, http.StatusOK)
		if w.Code != http.StatusOK {
			return
		}
		// Every event sent comes after the one named, and exists.
		after, _ := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
		sc := bufio.NewScanner(w.Body)
		last := ""
		for sc.Scan() {
			v, ok := strings.CutPrefix(sc.Text(), "id: ")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			// The terminal event (3) ends every stream resumed
			// before it, and one resumed beyond it.
			if err != nil || n > 3 || (n <= after && !(n == 3 && after > 3)) {
				t.Fatalf("after Last-Event-ID %q the stream sends event %q", id, v)
			}
			last = v
		}
		if last != "3" && after != 3 {
			t.Fatalf("after Last-Event-ID %q the stream ends with event %q, not the terminal event 3", id, last)
		}
	})
}
