package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tmaxmax/go-sse"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/testing/redistest"
	"github.com/sampled/sampled/internal/testing/testlog"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sampled-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binaries = sync.OnceValues(func() (replicaBinaries, error) { return buildBinaries(dir) })
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		redistest.Stop()
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// syncWriter lets the test read what run writes to stdout.
type syncWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	lines chan string
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		s := w.buf.String()
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		w.lines <- s[:i]
		w.buf.Reset()
		w.buf.WriteString(s[i+1:])
	}
	return len(p), nil
}

// start runs the service on a loopback port and returns its address.
func start(t *testing.T, env map[string]string) (string, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncWriter{lines: make(chan string, 16)}
	getenv := func(k string) string {
		if k == "SAMPLED_ADDR" {
			return "127.0.0.1:0"
		}
		return env[k]
	}
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, []string{"sampled"}, getenv, out, io.Discard) }()
	select {
	case line := <-out.lines:
		return strings.TrimPrefix(line, "listening on "), cancel, errc
	case err := <-errc:
		cancel()
		t.Fatalf("run: %v", err)
	}
	return "", cancel, errc
}

func TestRunServesAndDrains(t *testing.T) {
	addr, cancel, errc := start(t, nil)
	defer cancel()

	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}

	// An in-flight request: its handler is running and waits for the body.
	// With "Expect: 100-continue" the server answers "100 Continue" only
	// once the handler starts reading the body, so the test knows the
	// request is in flight before shutdown begins. (Headers that are merely
	// sent, not yet read, are dropped by net/http on shutdown.)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"still here?"}`
	fmt.Fprintf(conn, "POST /v1/sample HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(body))
	br := bufio.NewReader(conn)
	r, err := http.ReadResponse(br, nil)
	if err != nil || r.StatusCode != http.StatusContinue {
		t.Fatalf("want 100 Continue, got %v %v", r, err)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	cancel() // SIGINT/SIGTERM end this context in main.
	// The server stops accepting, but the in-flight request completes.
	waitRefused(t, addr)
	fmt.Fprint(conn, body)
	r, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("in-flight request lost: %v", err)
	}
	got, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !strings.Contains(string(got), "still here?") {
		t.Fatalf("in-flight request: %d %s", r.StatusCode, got)
	}
	if err := <-errc; err != nil {
		t.Fatalf("run returned %v", err)
	}
}

// waitRefused polls until the listener is closed.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("listener still open after shutdown began")
}

func TestRunRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"bad body limit", map[string]string{"SAMPLED_MAX_BODY_BYTES": "lots"}, nil, "SAMPLED_MAX_BODY_BYTES"},
		{"bad max tokens", map[string]string{"SAMPLED_MAX_TOKENS": "0"}, nil, "SAMPLED_MAX_TOKENS"},
		{"bad log format", nil, []string{"-log-format", "xml"}, "log format"},
		{"bad provider", map[string]string{"SAMPLING_PROVIDER": "gemini"}, nil, "SAMPLING_PROVIDER"},
		{"anthropic without key", map[string]string{"SAMPLING_PROVIDER": "anthropic"}, nil, "needs an API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"sampled"}, tt.args...), func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// TestRunWithOpenAICompatibleUpstream configures one provider by
// environment, serves a request through it, and checks the key reaches the
// upstream but never the logs or the response.
func TestRunWithOpenAICompatibleUpstream(t *testing.T) {
	const key = "sk-test-abcdef123456"
	var gotAuth string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"qwen2.5","choices":[{"index":0,"message":{"role":"assistant","content":"hello from upstream"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`)
	}))
	defer up.Close()
	var logs testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncWriter{lines: make(chan string, 16)}
	env := map[string]string{"SAMPLED_ADDR": "127.0.0.1:0", "SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": up.URL + "/v1",
		"SAMPLING_API_KEY": key, "SAMPLING_MODEL": "qwen2.5"}
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, []string{"sampled"}, func(k string) string { return env[k] }, out, &logs) }()
	addr := strings.TrimPrefix(<-out.lines, "listening on ")
	resp, err := http.Post("http://"+addr+"/v1/sample", "application/json", strings.NewReader(`{"prompt":"zebra-sentinel-prompt"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.Contains(string(body), "hello from upstream") || !strings.Contains(string(body), `"provider":"openai"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if gotAuth != "Bearer "+key {
		t.Errorf("upstream saw Authorization %q", gotAuth)
	}
	if strings.Contains(logs.String(), key) || strings.Contains(string(body), key) {
		t.Error("the API key leaked into logs or the response")
	}
	if strings.Contains(logs.String(), "zebra-sentinel-prompt") {
		t.Error("the prompt is in the info log")
	}
	for _, want := range []string{`"msg":"request"`, `"requestId":"`, `"route":"/v1/sample"`, `"provider":"openai"`, `"model":"qwen2.5"`, `"attempts":1`, `"outcome":"ok"`, `"durationMs":`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

// TestClientGoneCancelsUpstream: when the HTTP client of sampled goes away,
// the request sampled made to the provider is cancelled too.
func TestClientGoneCancelsUpstream(t *testing.T) {
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		<-r.Context().Done()
		close(cancelled)
	}))
	defer up.Close()
	env := map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": up.URL + "/v1", "SAMPLING_MODEL": "m"}
	addr, stop, errc := start(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/sample", strings.NewReader(`{"prompt":"hi"}`))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	cancel()
	<-cancelled // the fake upstream saw its request cancelled
	<-done
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestShutdownEndsStreamsWhole: a loop still waiting on its model when the
// service is told to stop is cancelled, and its event stream receives the
// terminal event (status cancelled) and a proper end before the service
// exits.
func TestShutdownEndsStreamsWhole(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer up.Close()
	env := map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": up.URL + "/v1", "SAMPLING_MODEL": "m"}
	addr, stop, errc := start(t, env)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/loops", strings.NewReader(`{"prompt":"hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-arrived // the loop waits on the model
	stop()
	var names []string
	last := ""
	for ev, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatalf("the stream broke after %v: %v", names, err)
		}
		names, last = append(names, ev.Type), ev.Data
	}
	var end struct{ Status string }
	_ = json.Unmarshal([]byte(last), &end)
	if diff := cmp.Diff([]any{[]string{"loop.started", "loop.completed"}, "cancelled"}, []any{names, end.Status}); diff != "" {
		t.Errorf("events, terminal status (-want +got):\n%s", diff)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
