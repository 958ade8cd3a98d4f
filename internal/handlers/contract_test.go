package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/go-cmp/cmp"
	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/api"
	"github.com/sampled/sampled/internal/runs/memory"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testwait"
	"github.com/sampled/sampled/internal/tools"
)

// newTestServer starts the whole service on the offline provider (see
// startStack); cfg, if not nil, adjusts the configuration before the
// handler is built.
func newTestServer(t testing.TB, cfg func(*Config)) *httptest.Server {
	t.Helper()
	return startStackWith(t, stackOptions{cfg: cfg}).srv
}

// contract is the loaded OpenAPI document and a router over its paths.
type contract struct {
	doc    *openapi3.T
	router routers.Router
}

// loadSpec loads and validates api/openapi.yaml.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec())
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// specOnce loads the contract once per test binary for checkResponse.
var specOnce = sync.OnceValues(func() (*contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec())
	if err != nil {
		return nil, fmt.Errorf("load api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate api/openapi.yaml: %w", err)
	}
	// Match routes by path only: test servers listen on random ports, not
	// on the document's servers.
	doc.Servers = nil
	// Event streams are documented as strings (type: string): read them as
	// text. Each event is checked against LoopEvent by checkEventStream.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	// So are the console's page and assets.
	for _, ct := range []string{"text/html", "text/javascript", "text/css", "image/svg+xml"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api/openapi.yaml: %w", err)
	}
	return &contract{doc: doc, router: router}, nil
})

// validateRequest routes req (whose body is reqBody, nil for none) through
// the document and validates it. A nil input and a routers error mean the
// document has no operation for the request; otherwise the error says why the
// document rejects the request, nil when it accepts it.
func (c *contract) validateRequest(ctx context.Context, req *http.Request, reqBody []byte) (*openapi3filter.RequestValidationInput, error) {
	r := req.Clone(ctx)
	r.Body = http.NoBody
	if reqBody != nil {
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	route, pathParams, err := c.router.FindRoute(r)
	if err != nil {
		return nil, err
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: pathParams,
		Route:      route,
		Options: &openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
		},
	}
	return in, openapi3filter.ValidateRequest(ctx, in)
}

// checkResponse checks one exchange with the service against
// api/openapi.yaml: the response (status, headers, content type and body)
// must be one the operation documents, and a request the document rejects
// must not succeed. req is the request as sent, reqBody its body (nil for
// none); respBody is the response's body, already read. A request for a path
// or method the document does not list must get a 404 or 405 problem.
func checkResponse(t *testing.T, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	c, err := specOnce()
	if err != nil {
		t.Fatal(err)
	}
	exchange := fmt.Sprintf("%s %s → %d", req.Method, req.URL.Path, resp.StatusCode)
	in, reqErr := c.validateRequest(t.Context(), req, reqBody)
	if in == nil {
		want := http.StatusNotFound
		if errors.Is(reqErr, routers.ErrMethodNotAllowed) {
			want = http.StatusMethodNotAllowed
		}
		if resp.StatusCode != want {
			t.Errorf("%s: the document has no such operation (%v), want %d", exchange, reqErr, want)
		}
		checkUnroutedProblem(t, c.doc, exchange, resp, respBody)
		return
	}
	if reqErr != nil && resp.StatusCode < 400 {
		t.Errorf("%s: the service accepted a request the document rejects:\n%v\nrequest: %s", exchange, reqErr, clipBody(reqBody))
	}

	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(t.Context(), out); err != nil {
		t.Errorf("%s: the response does not match the document:\n%v\nresponse: %s", exchange, err, clipBody(respBody))
	}
}

// checkUnroutedProblem checks a response the document has no operation for: a
// problem document with an X-Request-ID header.
func checkUnroutedProblem(t *testing.T, doc *openapi3.T, exchange string, resp *http.Response, body []byte) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: content type %q, want application/problem+json", exchange, ct)
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Errorf("%s: no X-Request-ID header", exchange)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: the problem is not JSON: %v: %s", exchange, err, clipBody(body))
		return
	}
	schema := doc.Components.Schemas["Problem"].Value
	if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
		t.Errorf("%s: the problem does not match the Problem schema: %v\n%s", exchange, err, clipBody(body))
	}
}

func clipBody(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

func TestSpecIsValid(t *testing.T) {
	doc := loadSpec(t)
	if got := doc.OpenAPI; got != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", got)
	}
	if doc.Info.Title != "sampled" || doc.Info.Version == "" || doc.Info.Description == "" {
		t.Errorf("info: title %q, version %q, description %d bytes; want title sampled, a version and a description",
			doc.Info.Title, doc.Info.Version, len(doc.Info.Description))
	}
	// House rules: every operation is named and described, and every error
	// answer is a problem document.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			at := method + " " + path
			if op.OperationID == "" || op.Summary == "" {
				t.Errorf("%s: want an operationId and a summary", at)
			}
			for code, ref := range op.Responses.Map() {
				if code[0] != '4' && code[0] != '5' && code != "default" {
					continue
				}
				var types []string
				for mt := range ref.Value.Content {
					types = append(types, mt)
				}
				if !slices.Equal(types, []string{"application/problem+json"}) {
					t.Errorf("%s %s: content %v, want application/problem+json only", at, code, types)
				}
			}
		}
	}
}

// TestBodyMembersMatchSpec checks that the members the document lets into a
// closed request body are the ones the service decodes: the properties
// (and, for SampleRequest, the propertyNames, which add the draft spelling
// tool_choice) against the JSON names of the body's Go type.
func TestBodyMembersMatchSpec(t *testing.T) {
	doc := loadSpec(t)
	tests := []struct {
		schema string
		body   any
	}{
		{"SampleRequest", sampleBody{}},
		{"LoopRequest", loopBody{}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			ref := doc.Components.Schemas[tt.schema]
			if ref == nil {
				t.Fatalf("no schema %s", tt.schema)
			}
			s := ref.Value
			var want []string
			switch {
			case s.PropertyNames != nil && s.PropertyNames.Value != nil:
				for _, v := range s.PropertyNames.Value.Enum {
					want = append(want, fmt.Sprint(v))
				}
				for name := range s.Properties {
					if !slices.Contains(want, name) {
						t.Errorf("property %s is not among the propertyNames %v", name, want)
					}
				}
			case s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has:
				for name := range s.Properties {
					want = append(want, name)
				}
			default:
				t.Fatalf("%s is not closed: neither propertyNames nor additionalProperties: false", tt.schema)
			}
			var got []string
			typ := reflect.TypeOf(tt.body)
			for i := range typ.NumField() {
				name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
				got = append(got, name)
			}
			slices.Sort(want)
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("members of %s (-document +service):\n%s", tt.schema, diff)
			}
		})
	}
}

// TestRoutesMatchSpec checks that the router and the document list the same
// operations, in both directions.
func TestRoutesMatchSpec(t *testing.T) {
	doc := loadSpec(t)
	var want []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			want = append(want, method+" "+path)
		}
	}
	slices.Sort(want)

	var got []string
	for _, rt := range newServer(Config{}).table() {
		got = append(got, rt.method+" "+rt.path)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes differ from api/openapi.yaml (-spec +router):\n%s", diff)
	}
}

// contractCase is one request of TestResponsesMatchSpec.
type contractCase struct {
	name        string
	small       bool // send to the server with MaxBodyBytes 1024
	notReady    bool // send to the server whose readiness check fails
	degraded    bool // send to the server whose MCP server git (not required) is down
	mcpDown     bool // send to the server whose required MCP server git is down
	closed      bool // send to the server whose loop engine is closed (shutting down)
	shortLog    bool // send to the server whose run store keeps 3 events per run
	method      string
	path        string            // "{name}" stands for the id of the loop saved as name
	header      map[string]string // extra request headers
	contentType string            // default application/json when there is a body
	body        string
	wantStatus  int
	// saveLoop names the loop this case starts (it must answer 201):
	// "{saveLoop}" in the path of later cases stands for its id.
	saveLoop string
	// waitLoop names a loop to wait for until it has finished before
	// sending the request.
	waitLoop string
	// specRejects says the document itself rejects the request, not only
	// the service: the rule is part of the contract.
	specRejects bool
	// check, if set, looks further at the decoded JSON answer.
	check func(t *testing.T, out map[string]any)
	// events, if set, looks further at the events of a text/event-stream
	// answer, each already checked against LoopEvent.
	events func(t *testing.T, evs []contractEvent)
}

// contractEvent is one message of a loop's event stream, read as the
// document's LoopEvent describes it.
type contractEvent struct {
	ID    int64
	Event string
	Data  map[string]any
}

// contractServer is what an answer says of one MCP server (/readyz's
// mcpServers, GET /v1/tools' servers); Error reports an error member.
type contractServer struct {
	Name      string
	Transport string
	Connected bool
	Required  bool
	Error     bool
}

// contractServers reads a JSON array of MCP servers.
func contractServers(t *testing.T, v any) []contractServer {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("MCP servers %v, want an array", v)
	}
	var out []contractServer
	for _, e := range list {
		m, _ := e.(map[string]any)
		_, hasErr := m["error"]
		out = append(out, contractServer{Name: fmt.Sprint(m["name"]), Transport: fmt.Sprint(m["transport"]),
			Connected: m["connected"] == true, Required: m["required"] == true, Error: hasErr})
	}
	return out
}

// startSettledStack starts the service with the MCP servers servers and
// waits until each has ended its first connection attempt, so that what
// /readyz and GET /v1/tools say of them no longer changes.
func startSettledStack(t *testing.T, servers map[string]tools.ServerOptions) *httptest.Server {
	t.Helper()
	st := startStackWith(t, stackOptions{servers: servers})
	testwait.Poll(t, 5*time.Millisecond, 30*time.Second, "the MCP servers' first connection attempts", func() bool {
		for _, s := range st.tools.Status() {
			if s.Error == "connecting" {
				return false
			}
		}
		return true
	})
	return st.srv
}

// contractCalcEvents are the events of a loop on "Please calculate 2 * (3 +
// 4)": the offline model calls std__calculate once, then answers in text.
var contractCalcEvents = []string{"loop.started", "model.completed", "tool.started", "tool.completed",
	"iteration.completed", "model.completed", "iteration.completed", "loop.completed"}

// contractHang is a provider (model "hang/m") whose model calls last until
// they are cancelled: a loop on it runs until DELETE /v1/loops/{id}.
type contractHang struct{}

func (contractHang) Name() string { return "hang" }

func (contractHang) Sample(ctx context.Context, _ *sampler.Request) (*sampler.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// contractTwin is a second provider offering a model "m" (as "twin/m"),
// which makes the bare name "m" ambiguous beside "hang/m".
type contractTwin struct{ contractHang }

func (contractTwin) Name() string { return "twin" }

// checkSampleStream reads a whole sampling event stream and checks each
// event against the document's SampleEvent schema, and the stream against
// its rules: no ids, and one result or error, last.
func checkSampleStream(t *testing.T, body []byte) {
	t.Helper()
	c, err := specOnce()
	if err != nil {
		t.Fatal(err)
	}
	schema := c.doc.Components.Schemas["SampleEvent"]
	if schema == nil {
		t.Fatal("api/openapi.yaml has no SampleEvent schema")
	}
	var names []string
	for ev, err := range sse.Read(bytes.NewReader(body), &sse.ReadConfig{MaxEventSize: 1 << 20}) {
		if err != nil {
			t.Fatalf("reading the event stream after %d events: %v\n%s", len(names), err, clipBody(body))
		}
		if ev.LastEventID != "" {
			t.Errorf("event %d (%s) has id %q; sampling streams have none", len(names)+1, ev.Type, ev.LastEventID)
		}
		var data any
		if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
			t.Errorf("event %s: data is not JSON: %v: %s", ev.Type, err, ev.Data)
		}
		msg := map[string]any{"event": ev.Type, "data": data}
		if err := schema.Value.VisitJSON(msg, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
			t.Errorf("event %d (%s) does not match SampleEvent: %v\ndata: %s", len(names)+1, ev.Type, err, ev.Data)
		}
		names = append(names, ev.Type)
	}
	if len(names) == 0 {
		t.Fatalf("the stream holds no event:\n%s", clipBody(body))
	}
	for i, n := range names {
		if end := n == "result" || n == "error"; end != (i == len(names)-1) {
			t.Errorf("events %v: one result or error must end the stream", names)
			break
		}
	}
}

// checkEventStream reads a whole text/event-stream body and checks each
// event against the document's LoopEvent schema, and the stream against
// the catalogue's rules: consecutive ids, and an end after loop.completed.
func checkEventStream(t *testing.T, body []byte) []contractEvent {
	t.Helper()
	c, err := specOnce()
	if err != nil {
		t.Fatal(err)
	}
	schema := c.doc.Components.Schemas["LoopEvent"]
	if schema == nil {
		t.Fatal("api/openapi.yaml has no LoopEvent schema")
	}
	var evs []contractEvent
	for ev, err := range sse.Read(bytes.NewReader(body), &sse.ReadConfig{MaxEventSize: 1 << 20}) {
		if err != nil {
			t.Fatalf("reading the event stream after %d events: %v\n%s", len(evs), err, clipBody(body))
		}
		id, err := strconv.ParseInt(ev.LastEventID, 10, 64)
		if err != nil {
			t.Errorf("event %d (%s): id %q is not an integer", len(evs)+1, ev.Type, ev.LastEventID)
		}
		var data any
		if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
			t.Errorf("event %s (%s): data is not JSON: %v: %s", ev.LastEventID, ev.Type, err, ev.Data)
		}
		msg := map[string]any{"id": float64(id), "event": ev.Type, "data": data}
		if err := schema.Value.VisitJSON(msg, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
			t.Errorf("event %s (%s) does not match LoopEvent: %v\ndata: %s", ev.LastEventID, ev.Type, err, ev.Data)
		}
		obj, _ := data.(map[string]any)
		evs = append(evs, contractEvent{ID: id, Event: ev.Type, Data: obj})
	}
	if len(evs) == 0 {
		t.Fatalf("the stream holds no event:\n%s", clipBody(body))
	}
	for i, ev := range evs {
		if want := evs[0].ID + int64(i); ev.ID != want {
			t.Errorf("event %d (%s) has id %d, want %d: ids increase by 1", i, ev.Event, ev.ID, want)
		}
		if ev.Event == "loop.completed" && i != len(evs)-1 {
			t.Errorf("event %d: loop.completed is not the last event", ev.ID)
		}
	}
	if last := evs[len(evs)-1]; last.Event != "loop.completed" {
		t.Errorf("the stream ends after %s (id %d), want loop.completed", last.Event, last.ID)
	}
	return evs
}

// waitLoopFinished polls GET /v1/loops/{id} until the loop is no longer
// running.
func waitLoopFinished(t *testing.T, s *httptest.Server, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/v1/loops/"+id, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatalf("loop %s: still running after 30s? %v", id, err)
		}
		var run struct {
			Status string `json:"status"`
		}
		err = json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET /v1/loops/%s: status %d, %v", id, resp.StatusCode, err)
		}
		if run.Status != "running" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("loop %s: still running after 30s", id)
		case <-tick.C:
		}
	}
}

// TestResponsesMatchSpec drives every route and the main statuses through
// the real service on the offline provider and checks each exchange
// against api/openapi.yaml.
func TestResponsesMatchSpec(t *testing.T) {
	srv := startStackWith(t, stackOptions{extra: []sampler.Provider{contractHang{}, contractTwin{}}}).srv
	small := newTestServer(t, func(c *Config) { c.MaxBodyBytes = 1024 })
	notReady := newTestServer(t, func(c *Config) {
		c.Ready = func(ctx context.Context) error { return errors.New("provider offline: unreachable") }
	})
	shortLog := startStackWith(t, stackOptions{runs: memory.Options{MaxEvents: 3}}).srv
	missing := filepath.Join(t.TempDir(), "missing-mcp-server")
	degraded := startSettledStack(t, map[string]tools.ServerOptions{"git": {Command: missing}})
	mcpDown := startSettledStack(t, map[string]tools.ServerOptions{"git": {Command: missing, Required: true}, "fetch": {Command: missing}})
	// closed is a service shutting down: its loop engine is closed, as
	// App.Drain closes it.
	closedStack := startStackWith(t, stackOptions{})
	closedStack.loops.Close()
	closed := closedStack.srv
	// loops holds the ids of the loops cases started, by saveLoop name.
	loops := map[string]string{}

	const examples = "../../reference/mcp/examples/CreateMessageRequestParams"
	var followUp struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	raw, err := os.ReadFile(filepath.Join(examples, "follow-up-with-tool-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &followUp); err != nil {
		t.Fatal(err)
	}

	const weatherTool = `{"name":"get_weather","description":"Get current weather for a city","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	const personSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name","age"]}`

	wantParsed := func(t *testing.T, out map[string]any) {
		t.Helper()
		if p, ok := out["parsed"].(map[string]any); !ok || p["name"] == nil {
			t.Errorf("parsed = %v, want a person", out["parsed"])
		}
	}
	wantToolCall := func(t *testing.T, out map[string]any) {
		t.Helper()
		calls, _ := out["toolCalls"].([]any)
		if len(calls) == 0 {
			t.Fatalf("no tool calls: %v", out)
		}
		if name := calls[0].(map[string]any)["name"]; name != "get_weather" {
			t.Errorf("tool call names %v, want get_weather", name)
		}
	}
	wantExhausted := func(method string) func(*testing.T, map[string]any) {
		return func(t *testing.T, out map[string]any) {
			t.Helper()
			if out["method"] != method || out["attempts"] != 3.0 || out["lastResult"] == nil {
				t.Errorf("problem %v, want method %s, 3 attempts and lastResult", out, method)
			}
		}
	}
	wantProblem := func(slug string) func(*testing.T, map[string]any) {
		return func(t *testing.T, out map[string]any) {
			t.Helper()
			if want := "https://sampled.dev/problems/" + slug; out["type"] != want {
				t.Errorf("problem type %v, want %s", out["type"], want)
			}
		}
	}
	wantStdTools := func(t *testing.T, out map[string]any) {
		t.Helper()
		tools, _ := out["tools"].([]any)
		var calc map[string]any
		for _, tool := range tools {
			if m := tool.(map[string]any); m["name"] == "std__calculate" {
				calc = m
			}
		}
		if calc == nil || calc["server"] != "std" || calc["original"] != "calculate" {
			t.Errorf("tools %v, want std__calculate of server std", tools)
		}
		want := []contractServer{{Name: "std", Transport: "builtin", Connected: true}}
		if diff := cmp.Diff(want, contractServers(t, out["servers"])); diff != "" {
			t.Errorf("servers (-want +got):\n%s", diff)
		}
	}
	// wantServers checks the MCP servers of an answer, in member, against
	// want.
	wantServers := func(member string, want ...contractServer) func(*testing.T, map[string]any) {
		return func(t *testing.T, out map[string]any) {
			t.Helper()
			if diff := cmp.Diff(want, contractServers(t, out[member])); diff != "" {
				t.Errorf("%s (-want +got):\n%s", member, diff)
			}
		}
	}
	stdServer := contractServer{Name: "std", Transport: "builtin", Connected: true}
	gitDown := contractServer{Name: "git", Transport: "stdio"}
	wantLoopStatus := func(status string) func(*testing.T, map[string]any) {
		return func(t *testing.T, out map[string]any) {
			t.Helper()
			if out["status"] != status {
				t.Errorf("status %v, want %s", out["status"], status)
			}
			id, _ := out["id"].(string)
			links, _ := out["links"].(map[string]any)
			if id == "" || links["self"] != "/v1/loops/"+id || links["events"] != "/v1/loops/"+id+"/events" {
				t.Errorf("id %q, links %v; want links to /v1/loops/{id}", id, links)
			}
		}
	}
	wantCalcRun := func(t *testing.T, out map[string]any) {
		t.Helper()
		wantLoopStatus("completed")(t, out)
		if out["iterations"] != 2.0 || !strings.Contains(fmt.Sprint(out["result"]), "14") || out["finishedAt"] == nil {
			t.Errorf("iterations %v, result %v, finishedAt %v; want 2, the value 14, a time", out["iterations"], out["result"], out["finishedAt"])
		}
		msgs, _ := out["messages"].([]any)
		var roles, blocks []string
		for _, m := range msgs {
			m := m.(map[string]any)
			roles = append(roles, fmt.Sprint(m["role"]))
			for _, b := range m["content"].([]any) {
				b := b.(map[string]any)
				blocks = append(blocks, fmt.Sprint(b["type"], " ", b["name"]))
			}
		}
		if diff := cmp.Diff([]string{"user", "assistant", "user", "assistant"}, roles); diff != "" {
			t.Errorf("message roles (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"text <nil>", "tool_use std__calculate", "tool_result <nil>", "text <nil>"}, blocks); diff != "" {
			t.Errorf("message blocks (-want +got):\n%s", diff)
		}
	}
	wantCancelled := func(t *testing.T, out map[string]any) {
		t.Helper()
		wantLoopStatus("cancelled")(t, out)
		if out["error"] == nil || out["finishedAt"] == nil {
			t.Errorf("error %v, finishedAt %v; want both", out["error"], out["finishedAt"])
		}
	}
	// wantEvents checks the names of a stream's events, from id first on.
	wantEvents := func(first int64, names []string, status string) func(*testing.T, []contractEvent) {
		return func(t *testing.T, evs []contractEvent) {
			t.Helper()
			var got []string
			for _, ev := range evs {
				got = append(got, ev.Event)
			}
			if diff := cmp.Diff(names, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if len(evs) == 0 {
				return
			}
			if evs[0].ID != first {
				t.Errorf("first event id %d, want %d", evs[0].ID, first)
			}
			if last := evs[len(evs)-1].Data; last["status"] != status || last["success"] != (status == "completed") {
				t.Errorf("loop.completed %v, want status %s", last, status)
			}
		}
	}
	wantCalcEvents := func(first int64) func(*testing.T, []contractEvent) {
		check := wantEvents(first, contractCalcEvents[first-1:], "completed")
		return func(t *testing.T, evs []contractEvent) {
			t.Helper()
			check(t, evs)
			for _, ev := range evs {
				if (ev.Event == "tool.started" || ev.Event == "tool.completed") && ev.Data["name"] != "std__calculate" {
					t.Errorf("%s calls %v, want std__calculate", ev.Event, ev.Data["name"])
				}
				if ev.Event == "loop.completed" && !strings.Contains(fmt.Sprint(ev.Data["result"]), "14") {
					t.Errorf("loop.completed result %v, want the value 14", ev.Data["result"])
				}
			}
		}
	}
	wantErrorAt := func(path string) func(*testing.T, map[string]any) {
		return func(t *testing.T, out map[string]any) {
			t.Helper()
			errs, _ := out["errors"].([]any)
			for _, e := range errs {
				if e.(map[string]any)["path"] == path {
					return
				}
			}
			t.Errorf("errors %v do not name %s", out["errors"], path)
		}
	}

	const (
		calcLoop    = `{"prompt":"Please calculate 2 * (3 + 4)"}`
		unknownLoop = "loop_0000000000000000"
	)

	tests := []contractCase{
		{name: "healthz", method: "GET", path: "/healthz", wantStatus: 200},
		{name: "readyz", method: "GET", path: "/readyz", wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			wantServers("mcpServers", stdServer)(t, out)
			if d, ok := out["degraded"]; ok {
				t.Errorf("degraded %v, want none while every server is connected", d)
			}
		}},
		{name: "readyz not ready", notReady: true, method: "GET", path: "/readyz", wantStatus: 503, check: func(t *testing.T, out map[string]any) {
			wantProblem("not-ready")(t, out)
			wantServers("mcpServers", stdServer)(t, out)
		}},
		{name: "readyz degraded", degraded: true, method: "GET", path: "/readyz", wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			wantServers("mcpServers", gitDown, stdServer)(t, out)
			if diff := cmp.Diff([]any{"git"}, out["degraded"]); diff != "" || out["status"] != "ready" {
				t.Errorf("status %v, degraded (-want +got):\n%s", out["status"], diff)
			}
		}},
		{name: "readyz required server down", mcpDown: true, method: "GET", path: "/readyz", wantStatus: 503, check: func(t *testing.T, out map[string]any) {
			wantProblem("not-ready")(t, out)
			fetch, git := gitDown, gitDown
			fetch.Name, git.Required = "fetch", true
			wantServers("mcpServers", fetch, git, stdServer)(t, out)
			if d := fmt.Sprint(out["detail"]); !strings.Contains(d, "git") || strings.Contains(d, "fetch") {
				t.Errorf("detail %q, want git named and fetch not", d)
			}
		}},
		{name: "metrics", method: "GET", path: "/metrics", wantStatus: 200},
		{name: "openapi", method: "GET", path: "/openapi.yaml", wantStatus: 200},
		{name: "key self without keys", method: "GET", path: "/v1/keys/self", wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			if out["name"] != "anonymous" {
				t.Errorf("name %v, want anonymous", out["name"])
			}
		}},
		{name: "models", method: "GET", path: "/v1/models", wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			if out["default"] != "offline/default" {
				t.Errorf("default %v, want offline/default", out["default"])
			}
		}},

		{name: "sample prompt", method: "POST", path: "/v1/sample", body: `{"prompt":"Name three primary colours."}`, wantStatus: 200},
		{name: "sample messages with tool results", method: "POST", path: "/v1/sample",
			body:       `{"messages":` + string(followUp.Messages) + `,"tools":` + string(followUp.Tools) + `,"systemPrompt":"Be brief.","maxTokens":200,"temperature":0.5,"stopSequences":["\n\n"],"metadata":{"user":"u1"},"modelPreferences":{"hints":[{"name":"default"}],"speedPriority":1}}`,
			wantStatus: 200},
		{name: "sample schema mode", method: "POST", path: "/v1/sample", body: `{"prompt":"a person","schema":` + personSchema + `}`, wantStatus: 200, check: wantParsed},
		{name: "sample schema mode parse error", method: "POST", path: "/v1/sample", body: `{"prompt":"a person","model":"offline/broken","schema":` + personSchema + `}`, wantStatus: 200,
			check: func(t *testing.T, out map[string]any) {
				if p, ok := out["parsed"]; !ok || p != nil || out["parseError"] == nil {
					t.Errorf("parsed %v, parseError %v; want null and a parse error", out["parsed"], out["parseError"])
				}
			}},
		{name: "sample tools mode", method: "POST", path: "/v1/sample", body: `{"prompt":"weather in Paris","tools":[` + weatherTool + `],"toolChoice":"required"}`, wantStatus: 200, check: wantToolCall},
		{name: "sample tools mode draft tool_choice", method: "POST", path: "/v1/sample", body: `{"prompt":"weather in Paris","tools":[` + weatherTool + `],"tool_choice":{"mode":"tool","name":"get_weather"}}`, wantStatus: 200, check: wantToolCall},

		{name: "sample/schema", method: "POST", path: "/v1/sample/schema", body: `{"prompt":"a person","schema":` + personSchema + `,"retries":1}`, wantStatus: 200, check: wantParsed},
		{name: "sample/schema flaky", method: "POST", path: "/v1/sample/schema", body: `{"prompt":"a person","model":"offline/flaky","schema":` + personSchema + `}`, wantStatus: 200, check: wantParsed},
		{name: "sample/schema broken", method: "POST", path: "/v1/sample/schema", body: `{"prompt":"a person","model":"offline/broken","schema":` + personSchema + `}`, wantStatus: 422, check: wantExhausted("sampleSchema")},
		{name: "sample/tools", method: "POST", path: "/v1/sample/tools", body: `{"prompt":"weather in Paris","tools":[` + weatherTool + `]}`, wantStatus: 200, check: wantToolCall},
		{name: "sample/tools broken", method: "POST", path: "/v1/sample/tools", body: `{"prompt":"weather in Paris","model":"offline/broken","tools":[` + weatherTool + `]}`, wantStatus: 422, check: wantExhausted("sampleTools")},

		{name: "sample schema and tools", method: "POST", path: "/v1/sample", body: `{"prompt":"a","schema":{"type":"object"},"tools":[` + weatherTool + `]}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/tools")},
		{name: "sample bad JSON", method: "POST", path: "/v1/sample", body: `{"prompt":`, wantStatus: 400, specRejects: true, check: wantErrorAt("/")},
		{name: "sample unknown member", method: "POST", path: "/v1/sample", body: `{"prompt":"a","max_tokens":5}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/max_tokens")},
		{name: "sample unknown model", method: "POST", path: "/v1/sample", body: `{"prompt":"a","model":"nowhere/none"}`, wantStatus: 400, check: wantErrorAt("/model")},
		{name: "sample bare model name", method: "POST", path: "/v1/sample", body: `{"prompt":"a","model":"default"}`, wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			if out["provider"] != "offline" || out["model"] != "default" {
				t.Errorf("provider %v, model %v; want offline/default", out["provider"], out["model"])
			}
		}},
		{name: "sample ambiguous bare model name", method: "POST", path: "/v1/sample", body: `{"prompt":"a","model":"m"}`, wantStatus: 400, check: func(t *testing.T, out map[string]any) {
			wantErrorAt("/model")(t, out)
			if d := fmt.Sprint(out["errors"]); !strings.Contains(d, "hang/m") || !strings.Contains(d, "twin/m") {
				t.Errorf("errors %s, want the candidates hang/m and twin/m named", d)
			}
		}},
		{name: "sample/schema without schema", method: "POST", path: "/v1/sample/schema", body: `{"prompt":"a"}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/schema")},
		{name: "sample/tools without tools", method: "POST", path: "/v1/sample/tools", body: `{"prompt":"a"}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/tools")},
		{name: "sample too large", small: true, method: "POST", path: "/v1/sample", body: `{"prompt":"` + strings.Repeat("x", 2000) + `"}`, wantStatus: 413},
		{name: "sample text/plain", method: "POST", path: "/v1/sample", contentType: "text/plain", body: `{"prompt":"a"}`, wantStatus: 415, specRejects: true},

		{name: "messages without maxTokens", method: "POST", path: "/v1/messages", body: `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`, wantStatus: 400, specRejects: true,
			check: func(t *testing.T, out map[string]any) {
				if out["code"] != -32602.0 {
					t.Errorf("code %v, want -32602", out["code"])
				}
			}},
		{name: "messages too large", small: true, method: "POST", path: "/v1/messages", body: `{"maxTokens":10,"messages":[{"role":"user","content":{"type":"text","text":"` + strings.Repeat("x", 2000) + `"}}]}`, wantStatus: 413},
		{name: "messages text/plain", method: "POST", path: "/v1/messages", contentType: "text/plain", body: `{}`, wantStatus: 415, specRejects: true},

		{name: "messages unknown member", method: "POST", path: "/v1/messages", body: `{"maxTokens":10,"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"futureMember":true}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/futureMember")},
		{name: "messages tool_result answering nothing", method: "POST", path: "/v1/messages", body: `{"maxTokens":10,"messages":[{"role":"user","content":{"type":"tool_result","toolUseId":"nope","content":[]}}]}`, wantStatus: 400,
			check: wantErrorAt("/messages/0/content/toolUseId")},

		{name: "tools", method: "GET", path: "/v1/tools", wantStatus: 200, check: wantStdTools},
		{name: "tools degraded", degraded: true, method: "GET", path: "/v1/tools", wantStatus: 200,
			check: wantServers("servers", contractServer{Name: "git", Transport: "stdio", Error: true}, stdServer)},
		{name: "tools required server down", mcpDown: true, method: "GET", path: "/v1/tools", wantStatus: 200,
			check: wantServers("servers", contractServer{Name: "fetch", Transport: "stdio", Error: true},
				contractServer{Name: "git", Transport: "stdio", Required: true, Error: true}, stdServer)},

		{name: "sample streaming", method: "POST", path: "/v1/sample", body: `{"prompt":"Say hello","stream":true}`, wantStatus: 200},
		{name: "sample schema streaming", method: "POST", path: "/v1/sample/schema", header: map[string]string{"Accept": "text/event-stream"},
			body: `{"prompt":"a person","model":"offline/flaky","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`, wantStatus: 200},
		{name: "sample tools streaming", method: "POST", path: "/v1/sample/tools", body: `{"prompt":"weather in Paris","stream":true,"tools":[{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`, wantStatus: 200},
		{name: "sample streaming invalid", method: "POST", path: "/v1/sample", body: `{"prompt":"","stream":true}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/prompt")},
		{name: "messages streaming", method: "POST", path: "/v1/messages", body: `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":20,"stream":true}`, wantStatus: 200},

		{name: "loops start", method: "POST", path: "/v1/loops", body: calcLoop, wantStatus: 201, saveLoop: "calc", check: wantLoopStatus("running")},
		{name: "loops start streaming deltas", method: "POST", path: "/v1/loops", header: map[string]string{"Accept": "text/event-stream"},
			body: `{"prompt":"Please calculate 2 * (3 + 4)","allowedTools":["std__*"],"maxIterations":5,"streamDeltas":true}`, wantStatus: 200,
			events: func(t *testing.T, evs []contractEvent) {
				var text, completed string
				for _, ev := range evs {
					switch ev.Event {
					case "model.delta":
						s, _ := ev.Data["text"].(string)
						text += s
					case "model.completed":
						s, _ := ev.Data["text"].(string)
						completed += s
					}
				}
				if text == "" || text != completed {
					t.Errorf("model.delta texts join to %q; model.completed texts to %q", text, completed)
				}
			}},
		{name: "loops start streaming", method: "POST", path: "/v1/loops", header: map[string]string{"Accept": "text/event-stream"},
			body:       `{"prompt":"Please calculate 2 * (3 + 4)","systemPrompt":"Use the tools.","allowedTools":["std__*"],"toolChoice":{"mode":"auto"},"maxIterations":5,"timeoutMs":60000,"maxTokens":200,"temperature":0.5}`,
			wantStatus: 200, events: wantCalcEvents(1)},
		{name: "loops start maxIterations too large", method: "POST", path: "/v1/loops", body: `{"prompt":"a","maxIterations":1000}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/maxIterations")},
		{name: "loops start timeoutMs too large", method: "POST", path: "/v1/loops", body: `{"prompt":"a","timeoutMs":3600001}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/timeoutMs")},
		{name: "loops start unknown member", method: "POST", path: "/v1/loops", body: `{"prompt":"a","max_iterations":5}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/max_iterations")},
		{name: "loops start prompt and messages", method: "POST", path: "/v1/loops", body: `{"prompt":"a","messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/prompt")},
		{name: "loops start without prompt", method: "POST", path: "/v1/loops", body: `{"maxIterations":2}`, wantStatus: 400, specRejects: true, check: wantErrorAt("/messages")},
		{name: "loops start bad glob", method: "POST", path: "/v1/loops", body: `{"prompt":"a","allowedTools":["std__["]}`, wantStatus: 400, check: wantErrorAt("/allowedTools/0")},
		{name: "loops start shutting down", closed: true, method: "POST", path: "/v1/loops", body: calcLoop, wantStatus: 503, check: wantProblem("not-ready")},
		{name: "loops start too large", small: true, method: "POST", path: "/v1/loops", body: `{"prompt":"` + strings.Repeat("x", 2000) + `"}`, wantStatus: 413},
		{name: "loops start text/plain", method: "POST", path: "/v1/loops", contentType: "text/plain", body: calcLoop, wantStatus: 415, specRejects: true},

		{name: "loop finished", method: "GET", path: "/v1/loops/{calc}", waitLoop: "calc", wantStatus: 200, check: wantCalcRun},
		{name: "loop unknown", method: "GET", path: "/v1/loops/" + unknownLoop, wantStatus: 404, check: wantProblem("loop-not-found")},
		{name: "loop cancel finished", method: "DELETE", path: "/v1/loops/{calc}", wantStatus: 409, check: wantProblem("loop-finished")},
		{name: "loop cancel unknown", method: "DELETE", path: "/v1/loops/" + unknownLoop, wantStatus: 404, check: wantProblem("loop-not-found")},
		{name: "loop events", method: "GET", path: "/v1/loops/{calc}/events", wantStatus: 200, events: wantCalcEvents(1)},
		{name: "loop events after lastEventId", method: "GET", path: "/v1/loops/{calc}/events?lastEventId=5", wantStatus: 200, events: wantCalcEvents(6)},
		{name: "loop events after Last-Event-ID", method: "GET", path: "/v1/loops/{calc}/events", header: map[string]string{"Last-Event-ID": "7"}, wantStatus: 200, events: wantCalcEvents(8)},
		{name: "loop events bad Last-Event-ID", method: "GET", path: "/v1/loops/{calc}/events", header: map[string]string{"Last-Event-ID": "abc"}, wantStatus: 400, specRejects: true, check: wantErrorAt("/lastEventId")},
		{name: "loop events negative lastEventId", method: "GET", path: "/v1/loops/{calc}/events?lastEventId=-1", wantStatus: 400, specRejects: true, check: wantErrorAt("/lastEventId")},
		{name: "loop events unknown", method: "GET", path: "/v1/loops/" + unknownLoop + "/events", wantStatus: 404, check: wantProblem("loop-not-found")},

		{name: "loops start unknown model", method: "POST", path: "/v1/loops", body: `{"prompt":"a","model":"nowhere/none"}`, wantStatus: 400, check: wantErrorAt("/model")},
		{name: "loops start ambiguous model", method: "POST", path: "/v1/loops", body: `{"prompt":"a","model":"m"}`, wantStatus: 400, check: func(t *testing.T, out map[string]any) {
			wantErrorAt("/model")(t, out)
			if d := fmt.Sprint(out["errors"]); !strings.Contains(d, "hang/m") || !strings.Contains(d, "twin/m") {
				t.Errorf("errors %s, want the candidates hang/m and twin/m named", d)
			}
		}},

		{name: "loops start hanging", method: "POST", path: "/v1/loops", body: `{"prompt":"a","model":"hang/m"}`, wantStatus: 201, saveLoop: "hang", check: wantLoopStatus("running")},
		{name: "loop running", method: "GET", path: "/v1/loops/{hang}", wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			wantLoopStatus("running")(t, out)
			if _, ok := out["finishedAt"]; ok {
				t.Errorf("finishedAt %v, want none while running", out["finishedAt"])
			}
		}},
		{name: "loop cancel running", method: "DELETE", path: "/v1/loops/{hang}", wantStatus: 202, check: wantLoopStatus("cancelling")},
		{name: "loop cancelled", method: "GET", path: "/v1/loops/{hang}", waitLoop: "hang", wantStatus: 200, check: wantCancelled},
		{name: "loop events cancelled", method: "GET", path: "/v1/loops/{hang}/events", wantStatus: 200, events: wantEvents(1, []string{"loop.started", "loop.completed"}, "cancelled")},

		{name: "loops list", method: "GET", path: "/v1/loops?limit=1", wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			if l, _ := out["loops"].([]any); len(l) != 1 || out["next"] == nil {
				t.Errorf("list %v, want one run and a next cursor", out)
			}
		}},
		{name: "loops list filtered", method: "GET", path: "/v1/loops?status=cancelled&origin=http", wantStatus: 200, check: func(t *testing.T, out map[string]any) {
			if l, _ := out["loops"].([]any); len(l) != 1 || l[0].(map[string]any)["status"] != "cancelled" {
				t.Errorf("list %v, want the cancelled run", out)
			}
		}},
		{name: "loops list bad limit", method: "GET", path: "/v1/loops?limit=101", wantStatus: 400, specRejects: true, check: wantErrorAt("/limit")},
		{name: "loops list bad status", method: "GET", path: "/v1/loops?status=done", wantStatus: 400, specRejects: true, check: wantErrorAt("/status")},
		{name: "loops list bad cursor", method: "GET", path: "/v1/loops?cursor=nope", wantStatus: 400, check: wantErrorAt("/cursor")},

		{name: "loops start short log", shortLog: true, method: "POST", path: "/v1/loops", body: calcLoop, wantStatus: 201, saveLoop: "short"},
		{name: "loop events expired", shortLog: true, method: "GET", path: "/v1/loops/{short}/events", waitLoop: "short", wantStatus: 410, check: wantProblem("events-expired")},
		{name: "loop events within the log", shortLog: true, method: "GET", path: "/v1/loops/{short}/events?lastEventId=5", wantStatus: 200, events: wantCalcEvents(6)},

		{name: "console page", method: "GET", path: "/console", wantStatus: 200},
		{name: "console asset", method: "GET", path: "/console/app.js", wantStatus: 200},
		{name: "console missing asset", method: "GET", path: "/console/nothing.js", wantStatus: 404},

		{name: "unknown route", method: "GET", path: "/v2/nothing", wantStatus: 404},
		{name: "wrong method", method: "GET", path: "/v1/sample", wantStatus: 405},
	}

	files, err := filepath.Glob(filepath.Join(examples, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no MCP examples in %s: %v", examples, err)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, contractCase{name: "messages " + filepath.Base(f), method: "POST", path: "/v1/messages", body: string(body), wantStatus: 200,
			check: func(t *testing.T, out map[string]any) {
				if out["role"] != "assistant" || out["content"] == nil {
					t.Errorf("result %v, want an assistant message", out)
				}
			}})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := srv
			switch {
			case tt.small:
				s = small
			case tt.notReady:
				s = notReady
			case tt.shortLog:
				s = shortLog
			case tt.degraded:
				s = degraded
			case tt.mcpDown:
				s = mcpDown
			case tt.closed:
				s = closed
			}
			path := tt.path
			for name, id := range loops {
				path = strings.ReplaceAll(path, "{"+name+"}", id)
			}
			if strings.Contains(path, "{") {
				t.Fatalf("path %s names a loop no case started", path)
			}
			if tt.waitLoop != "" {
				id, ok := loops[tt.waitLoop]
				if !ok {
					t.Fatalf("no case started loop %s", tt.waitLoop)
				}
				waitLoopFinished(t, s, id)
			}
			var reqBody []byte
			var bodyReader io.Reader
			if tt.body != "" {
				reqBody = []byte(tt.body)
				bodyReader = bytes.NewReader(reqBody)
			}
			req, err := http.NewRequestWithContext(t.Context(), tt.method, s.URL+path, bodyReader)
			if err != nil {
				t.Fatal(err)
			}
			if reqBody != nil {
				ct := tt.contentType
				if ct == "" {
					ct = "application/json"
				}
				req.Header.Set("Content-Type", ct)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			req.Header.Set("X-Request-ID", "contract-"+strings.ReplaceAll(tt.name, " ", "-"))
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			respBody, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, clipBody(respBody))
			}
			if got, want := resp.Header.Get("X-Request-ID"), req.Header.Get("X-Request-ID"); got != want {
				t.Errorf("X-Request-ID %q, want the client's %q", got, want)
			}
			checkResponse(t, req, reqBody, resp, respBody)
			if tt.specRejects {
				c, err := specOnce()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.validateRequest(t.Context(), req, reqBody); err == nil {
					t.Errorf("api/openapi.yaml accepts the request; want it to state the rule the service enforces")
				}
			}
			if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" && !strings.HasPrefix(req.URL.Path, "/v1/loops") {
				checkSampleStream(t, respBody)
			} else if mt == "text/event-stream" {
				evs := checkEventStream(t, respBody)
				if tt.events != nil {
					tt.events(t, evs)
				}
			} else if tt.events != nil {
				t.Errorf("content type %q, want text/event-stream", resp.Header.Get("Content-Type"))
			}
			if tt.check != nil || tt.saveLoop != "" {
				var out map[string]any
				if err := json.Unmarshal(respBody, &out); err != nil {
					t.Fatalf("answer is not a JSON object: %v: %s", err, clipBody(respBody))
				}
				if tt.check != nil {
					tt.check(t, out)
				}
				if tt.saveLoop != "" {
					id, _ := out["id"].(string)
					if resp.StatusCode != http.StatusCreated || id == "" {
						t.Fatalf("no loop started: status %d, id %q", resp.StatusCode, id)
					}
					if loc := resp.Header.Get("Location"); loc != "/v1/loops/"+id {
						t.Errorf("Location %q, want /v1/loops/%s", loc, id)
					}
					loops[tt.saveLoop] = id
				}
			}
		})
	}
}
