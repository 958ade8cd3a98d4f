package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/sampler/offline"
	"github.com/sampled/sampled/internal/sampler/openai"
	"github.com/sampled/sampled/internal/testing/mcptest"
	"github.com/sampled/sampled/internal/testing/redistest"
	"github.com/sampled/sampled/internal/testing/testwait"
	"github.com/sampled/sampled/internal/tools"
)

// waitTimeout bounds every wait for something that must happen; generous
// for -race on a busy two-core machine.
const waitTimeout = 20 * time.Second

// mcpServerBin builds the tools package's test MCP server once per test
// binary. TestMain sets it.
var mcpServerBin func() (string, error)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loop-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mcpServerBin = sync.OnceValues(func() (string, error) { return mcptest.BuildServer(dir) })
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		redistest.Stop()
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// newRegistry starts a tool registry with the built-in std server and, when
// withTest is set, the test MCP server as "test" (connected on return).
func newRegistry(t testing.TB, withTest bool, m *metrics.Metrics) *tools.Registry {
	t.Helper()
	o := tools.Options{Metrics: m, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	if withTest {
		bin, err := mcpServerBin()
		if err != nil {
			t.Fatal(err)
		}
		o.Servers = map[string]tools.ServerOptions{"test": {Command: bin}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	reg, err := tools.New(o)
	if err != nil {
		t.Fatalf("tools.New: %v", err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Errorf("registry Close: %v", err)
		}
	})
	if err := reg.Start(ctx, nil); err != nil {
		t.Fatalf("tools.Start: %v", err)
	}
	if withTest {
		testwait.Poll(t, 10*time.Millisecond, waitTimeout, "the test MCP server", func() bool {
			return slices.ContainsFunc(reg.Status(), func(st tools.ServerStatus) bool { return st.Name == "test" && st.Connected })
		})
	}
	return reg
}

// offlineSampler returns a sampling service whose one model is the offline
// provider's default.
func offlineSampler(t testing.TB) *sampler.Service {
	t.Helper()
	cat := sampler.NewCatalog([]sampler.Model{{Provider: "offline", Name: offline.ModelDefault}}, "")
	svc, err := sampler.New(sampler.Options{Providers: []sampler.Provider{offline.New(nil)}, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// newEngine returns an engine that the test closes at its end, with a new
// in-memory store unless o has one.
func newEngine(t testing.TB, o loop.Options) (*loop.Engine, *memory.Store) {
	t.Helper()
	store, _ := o.Store.(*memory.Store)
	if o.Store == nil {
		store = memory.New(memory.Options{})
		o.Store = store
	}
	e := loop.New(o)
	t.Cleanup(e.Close)
	return e, store
}

// prompt is a one-message conversation.
func prompt(text string) []sampler.Message {
	return []sampler.Message{{Role: sampler.RoleUser, Content: []sampler.Content{sampler.TextBlock(text)}}}
}

// start starts a loop and fails the test if the spec is refused.
func start(t testing.TB, e *loop.Engine, spec loop.Spec) string {
	t.Helper()
	id, err := e.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return id
}

// eventData is the union of the payloads of the event catalogue.
// model.completed carries tool calls and iteration.completed tool names
// under the same key, so ToolCalls stays raw.
type eventData struct {
	// loop.started
	ID            string   `json:"id"`
	Model         string   `json:"model"`
	Tools         []string `json:"tools"`
	MaxIterations int      `json:"maxIterations"`
	TimeoutMs     int64    `json:"timeoutMs"`
	// model.completed, tool.*, iteration.completed
	Iteration  int             `json:"iteration"`
	StopReason string          `json:"stopReason"`
	Text       string          `json:"text"`
	ToolCalls  json.RawMessage `json:"toolCalls"`
	Usage      sampler.Usage   `json:"usage"`
	DurationMs int64           `json:"durationMs"`
	// tool.started, tool.completed
	CallID            string            `json:"callId"`
	Name              string            `json:"name"`
	Arguments         json.RawMessage   `json:"arguments"`
	IsError           bool              `json:"isError"`
	Content           []sampler.Content `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	// iteration.completed, loop.completed
	TraceID string `json:"traceId"`
	// loop.completed
	Status          string `json:"status"`
	TotalIterations int    `json:"totalIterations"`
	Success         bool   `json:"success"`
	Result          string `json:"result"`
	Error           string `json:"error"`
}

// event is one decoded event of a run's log.
type event struct {
	ID   int64
	Name string
	Data eventData
	Raw  json.RawMessage
}

// toolCalls decodes the tool calls of a model.completed event.
func (ev event) toolCalls(t testing.TB) []sampler.ToolCall {
	t.Helper()
	var calls []sampler.ToolCall
	if err := json.Unmarshal(ev.Data.ToolCalls, &calls); err != nil {
		t.Fatalf("%s toolCalls %s: %v", ev.Name, ev.Data.ToolCalls, err)
	}
	return calls
}

// toolNames decodes the tool names of an iteration.completed event.
func (ev event) toolNames(t testing.TB) []string {
	t.Helper()
	var names []string
	if err := json.Unmarshal(ev.Data.ToolCalls, &names); err != nil {
		t.Fatalf("%s toolCalls %s: %v", ev.Name, ev.Data.ToolCalls, err)
	}
	return names
}

// text is the text of a tool.completed event's content.
func (ev event) text() string { return sampler.TextOf(ev.Data.Content) }

func decodeEvent(t testing.TB, ev runs.Event) event {
	t.Helper()
	out := event{ID: ev.ID, Name: ev.Name, Raw: ev.Data}
	if err := json.Unmarshal(ev.Data, &out.Data); err != nil {
		t.Fatalf("event %d %s: %v\n%s", ev.ID, ev.Name, err, ev.Data)
	}
	return out
}

// watcher follows a run's events from its first one.
type watcher struct {
	t      testing.TB
	sub    runs.Subscription
	cancel context.CancelFunc
	timer  *time.Timer
	seen   []event
	ended  bool
}

func watch(t testing.TB, store runs.Store, id string) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := store.Subscribe(ctx, id, 0)
	if err != nil {
		cancel()
		t.Fatalf("Subscribe(%s): %v", id, err)
	}
	w := &watcher{t: t, sub: sub, cancel: cancel, timer: time.NewTimer(waitTimeout)}
	t.Cleanup(func() {
		w.timer.Stop()
		sub.Close()
		cancel()
	})
	return w
}

// next returns the next event, or ok false after the log's end.
func (w *watcher) next() (event, bool) {
	w.t.Helper()
	select {
	case ev, ok := <-w.sub.Events():
		if !ok {
			if err := w.sub.Err(); err != nil {
				w.t.Fatalf("subscription ended: %v", err)
			}
			w.ended = true
			return event{}, false
		}
		d := decodeEvent(w.t, ev)
		w.seen = append(w.seen, d)
		return d, true
	case <-w.timer.C:
		w.t.Fatalf("no event within %s; seen %v", waitTimeout, eventNames(w.seen))
		return event{}, false
	}
}

// until reads events up to and including the first that satisfies match.
func (w *watcher) until(what string, match func(event) bool) event {
	w.t.Helper()
	for {
		ev, ok := w.next()
		if !ok {
			w.t.Fatalf("the run ended before %s; seen %v", what, eventNames(w.seen))
		}
		if match(ev) {
			return ev
		}
	}
}

// all reads the events up to the end of the log and returns every event
// seen, checking that the log ends with exactly one loop.completed.
func (w *watcher) all() []event {
	w.t.Helper()
	for !w.ended {
		w.next()
	}
	n := 0
	for _, ev := range w.seen {
		if ev.Name == loop.EventLoopCompleted {
			n++
		}
	}
	if n != 1 || len(w.seen) == 0 || w.seen[len(w.seen)-1].Name != loop.EventLoopCompleted {
		w.t.Fatalf("the log does not end with one loop.completed: %v", eventNames(w.seen))
	}
	for i, ev := range w.seen {
		if ev.ID != int64(i+1) {
			w.t.Fatalf("event %d has id %d", i+1, ev.ID)
		}
	}
	return w.seen
}

// collect returns every event of a run, waiting for its terminal event.
func collect(t testing.TB, store runs.Store, id string) []event {
	t.Helper()
	return watch(t, store, id).all()
}

func eventNames(evs []event) []string {
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i] = ev.Name
	}
	return names
}

// named returns the events with that name.
func named(evs []event, name string) []event {
	var out []event
	for _, ev := range evs {
		if ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// last returns the terminal event's data.
func last(evs []event) eventData { return evs[len(evs)-1].Data }

// snapshot reads a run's snapshot.
func snapshot(t testing.TB, store runs.Store, id string) loop.Snapshot {
	t.Helper()
	b, err := store.Snapshot(context.Background(), id)
	if err != nil {
		t.Fatalf("Snapshot(%s): %v", id, err)
	}
	var s loop.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("snapshot: %v\n%s", err, b)
	}
	return s
}

// The fake OpenAI upstream.

// call is one tool call a scripted reply makes.
type call struct {
	id, name string
	args     any
}

// toolCallsReply is a chat.completion whose message calls tools.
func toolCallsReply(calls ...call) string {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type tc struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	list := make([]tc, len(calls))
	for i, c := range calls {
		args, err := json.Marshal(c.args)
		if err != nil {
			panic(err)
		}
		if c.args == nil {
			args = []byte("{}")
		}
		list[i] = tc{ID: c.id, Type: "function", Function: fn{Name: c.name, Arguments: string(args)}}
	}
	b, _ := json.Marshal(list)
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":` + string(b) + `},` +
		`"logprobs":null,"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
}

// textReply is a chat.completion answering in text.
func textReply(text string) string {
	b, _ := json.Marshal(text)
	return `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"gpt-4o",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + string(b) + `},` +
		`"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23}}`
}

// reply is one answer of the fake; status 0 means 200.
type reply struct {
	status int
	body   string
	// hang holds the request open, without an answer, until the client
	// goes away (or the test ends).
	hang bool
}

// chatRequest is the part of a chat completion request the tests read.
type chatRequest struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
}

// prompt returns the text of the request's first user message.
func (r chatRequest) prompt() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			var s string
			_ = json.Unmarshal(m.Content, &s)
			return s
		}
	}
	return ""
}

// toolChoice returns the tool_choice, compacted, or "" when absent.
func (r chatRequest) toolChoice() string {
	if len(r.ToolChoice) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, r.ToolChoice); err != nil {
		return string(r.ToolChoice)
	}
	return buf.String()
}

// toolNames returns the names of the tools the request declares.
func (r chatRequest) toolNames() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// toolMessage is a role:"tool" message of a request.
type toolMessage struct {
	CallID  string
	Content string
}

// toolMessages returns the role:"tool" messages of the request.
func (r chatRequest) toolMessages() []toolMessage {
	var out []toolMessage
	for _, m := range r.Messages {
		if m.Role == "tool" {
			var s string
			if json.Unmarshal(m.Content, &s) != nil {
				s = string(m.Content)
			}
			out = append(out, toolMessage{CallID: m.ToolCallID, Content: s})
		}
	}
	return out
}

// fakeOpenAI is an httptest OpenAI Chat Completions upstream whose replies
// are scripted: script gets the 1-based number of the request and the
// request, and returns the reply. It records every request.
type fakeOpenAI struct {
	t      testing.TB
	srv    *httptest.Server
	script func(n int, req chatRequest) reply
	// arrived receives a value when a hanging request arrives; gone when
	// its client went away.
	arrived, gone chan struct{}
	// stop releases hanging requests when the test ends.
	stop chan struct{}

	mu   sync.Mutex
	reqs []chatRequest
	raw  [][]byte
}

func newFakeOpenAI(t testing.TB, script func(n int, req chatRequest) reply) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{t: t, script: script, arrived: make(chan struct{}, 1), gone: make(chan struct{}, 1), stop: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	// Cleanups run last-in first-out: hanging handlers are released before
	// Close waits for them.
	t.Cleanup(func() { close(f.stop) })
	return f
}

// sequence scripts replies in order; requests past the end get the last.
func sequence(replies ...reply) func(int, chatRequest) reply {
	return func(n int, _ chatRequest) reply {
		return replies[min(n, len(replies))-1]
	}
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("fake OpenAI: read body: %v", err)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/chat/completions") {
		f.t.Errorf("fake OpenAI: got %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		f.t.Errorf("fake OpenAI: request body: %v\n%s", err, body)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.raw = append(f.raw, body)
	n := len(f.reqs)
	f.mu.Unlock()
	rep := f.script(n, req)
	if rep.hang {
		f.arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			f.gone <- struct{}{}
		case <-f.stop:
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.status != 0 {
		w.WriteHeader(rep.status)
	}
	_, _ = io.WriteString(w, rep.body)
}

// requests returns the requests received so far.
func (f *fakeOpenAI) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.reqs...)
}

// body returns the raw body of request n (1-based), for failure messages.
func (f *fakeOpenAI) body(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 1 || n > len(f.raw) {
		return ""
	}
	return string(f.raw[n-1])
}

// sampler returns a sampling service whose one model, openai/gpt-4o, is
// served by the fake, without upstream retries.
// sampler returns a sampling service on the fake; maxTokens 0 means the
// service's default.
func (f *fakeOpenAI) sampler(t testing.TB, maxTokens int) *sampler.Service {
	t.Helper()
	p := openai.New(openai.Options{BaseURL: f.srv.URL + "/v1", HTTPClient: f.srv.Client()})
	cat := sampler.NewCatalog([]sampler.Model{{Provider: p.Name(), Name: "gpt-4o"}}, "")
	svc, err := sampler.New(sampler.Options{Providers: []sampler.Provider{p}, Catalog: cat, DefaultMaxTokens: maxTokens,
		Upstream: retry.Upstream{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// rawEvents lists the events, one a line, for failure messages.
func rawEvents(evs []event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s %s\n", ev.Name, ev.Raw)
	}
	return b.String()
}
