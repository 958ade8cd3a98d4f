// Package handlers is the HTTP layer of sampled: routes, request decoding,
// RFC 9457 problems and the mapping of domain errors to statuses.
package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sampled/sampled/api"
	"github.com/sampled/sampled/internal/access"
	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// Config holds the dependencies of the HTTP layer. Zero values mean the
// documented defaults.
type Config struct {
	Sampler *sampler.Service
	// Metrics nil records nothing.
	Metrics *metrics.Metrics
	// Gatherer serves GET /metrics; nil serves an empty registry.
	Gatherer prometheus.Gatherer
	// Logger nil discards logs.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Ready reports whether dependencies are reachable; nil means ready.
	Ready func(ctx context.Context) error
	// Loops, Runs and Tools serve the tool-loop routes.
	Loops Loops
	Runs  Runs
	Tools Tools
	// Heartbeat is the interval of SSE comments on idle streams, and how
	// long a stream's write may wait for its client; 0 means 15 s.
	Heartbeat time.Duration
	// Access checks API keys and limits; nil admits every request without
	// limits. MetricsNeedKey puts GET /metrics behind the keys.
	Access         *access.Guard
	MetricsNeedKey bool
	// MCP serves /mcp (sampled as an MCP server); nil answers 404.
	MCP http.Handler
}

// DefaultMaxBodyBytes bounds request bodies unless Config says otherwise.
const DefaultMaxBodyBytes = 4 << 20

type server struct {
	httpMetrics    *httpMetrics
	sampler        *sampler.Service
	metrics        *metrics.Metrics
	metricsHandler http.Handler // serves /metrics from the Gatherer
	log            *slog.Logger
	maxBody        int64
	ready          func(ctx context.Context) error
	loops          Loops
	runs           Runs
	tools          Tools
	heartbeat      time.Duration
	frames         frameCache // SSE encodings shared by event streams
	guard          *access.Guard
	metricsNeedKey bool
	mcp            http.Handler
	labels         map[string]string // route label by mux pattern, set by routes
}

// New returns the service's HTTP handler.
func New(c Config) http.Handler { return newServer(c).routes() }

func newServer(c Config) *server {
	s := &server{sampler: c.Sampler, metrics: c.Metrics, log: c.Logger, maxBody: c.MaxBodyBytes, ready: c.Ready,
		loops: c.Loops, runs: c.Runs, tools: c.Tools, heartbeat: c.Heartbeat, guard: c.Access, metricsNeedKey: c.MetricsNeedKey,
		mcp: c.MCP}
	if s.mcp == nil {
		s.mcp = http.HandlerFunc(s.notFound)
	}
	if s.heartbeat <= 0 {
		s.heartbeat = 15 * time.Second
	}
	if s.metrics == nil {
		s.metrics = metrics.New(nil)
	}
	s.httpMetrics = &httpMetrics{m: s.metrics}
	if s.guard != nil {
		s.metrics.CountSamplingInFlight(s.guard.InFlight)
	}
	gatherer := c.Gatherer
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	s.metricsHandler = promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	return s
}

type ctxKey struct{}

// reqInfo is what the HTTP layer keeps of a request while it is served:
// its id and what handlers add to its log line. It is made once per
// request, with the status writer, by instrument.
type reqInfo struct {
	id     string
	attrs  []slog.Attr // starts in buf: one allocation for both
	buf    [8]slog.Attr
	sw     statusWriter
	caller *access.Caller // set by authenticate
}

func info(ctx context.Context) *reqInfo {
	ri, _ := ctx.Value(ctxKey{}).(*reqInfo)
	return ri
}

func requestID(ctx context.Context) string {
	if ri := info(ctx); ri != nil {
		return ri.id
	}
	return ""
}

// addLog adds attributes to the request's log line.
func addLog(ctx context.Context, attrs ...slog.Attr) {
	if ri := info(ctx); ri != nil {
		ri.attrs = append(ri.attrs, attrs...)
	}
}

// requestIDHeader is X-Request-ID in net/http's canonical form: the map is
// read and written with it directly, as Get and Set would canonicalize
// (and allocate) the spelling with "ID" on every request.
const requestIDHeader = "X-Request-Id"

// newRequestID takes a well-formed X-Request-ID from the client or makes
// one.
func newRequestID(r *http.Request) string {
	var id string
	if v := r.Header[requestIDHeader]; len(v) > 0 {
		id = v[0]
	}
	if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	return id
}

func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument gives each request its id (the X-Request-ID response header),
// records request counts and durations by route pattern, and logs each
// request in one line.
func (s *server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{id: newRequestID(r), sw: statusWriter{ResponseWriter: w}}
		ri.attrs = ri.buf[:0]
		w.Header()[requestIDHeader] = []string{ri.id}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri))
		// A complete answer (writeBody's) has been sent already: what
		// follows is off the client's path.
		next.ServeHTTP(&ri.sw, r)
		route := s.routeLabel(r)
		status := ri.sw.status
		switch {
		case status == 0 && r.Context().Err() != nil:
			// The client went away before an answer was written: nginx's
			// 499, never the 200 net/http would report.
			status = statusClientClosedRequest
		case status == 0:
			status = http.StatusOK
		}
		d := time.Since(start)
		stream := strings.HasPrefix(ri.sw.Header().Get("Content-Type"), "text/event-stream")
		s.httpMetrics.record(route, r.Method, status, d, stream)
		// The log line goes to the handler itself: Logger.LogAttrs would
		// also find the caller's program counter, which nobody reads.
		if h := s.log.Handler(); h.Enabled(r.Context(), slog.LevelInfo) {
			rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
			rec.AddAttrs(slog.String("requestId", ri.id), slog.String("method", r.Method), slog.String("route", route),
				slog.Int("status", status), slog.Float64("durationMs", float64(d.Microseconds())/1000))
			rec.AddAttrs(ri.attrs...)
			_ = h.Handle(r.Context(), rec)
		}
	})
}

// statusClientClosedRequest is the status logged and counted for a request
// whose client went away before its answer (nginx's 499).
const statusClientClosedRequest = 499

// httpMetrics records requests, with the series of each route, method and
// status looked up once.
type httpMetrics struct {
	m      *metrics.Metrics
	series sync.Map // httpKey -> *httpSeries
}

type httpKey struct {
	route, method string
	status        int
}

type httpSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func (h *httpMetrics) record(route, method string, status int, d time.Duration, stream bool) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // bounded label: clients can send any method
	}
	k := httpKey{route, method, status}
	v, ok := h.series.Load(k)
	if !ok {
		v, _ = h.series.LoadOrStore(k, &httpSeries{
			requests: h.m.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(status)),
			duration: h.m.HTTPDuration.WithLabelValues(route, method),
		})
	}
	hs := v.(*httpSeries)
	hs.requests.Inc()
	if !stream {
		hs.duration.Observe(d.Seconds())
	}
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeProblem(w, r, Problem{Type: problemBase + "not-found", Title: "Not found", Status: http.StatusNotFound,
		Detail: "no route for " + r.URL.Path + "; GET /openapi.yaml lists the routes"})
}

// methodNotAllowed answers a method the path does not serve; allow lists
// those it does.
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	s.writeProblem(w, r, Problem{Type: problemBase + "method-not-allowed", Title: "Method not allowed",
		Status: http.StatusMethodNotAllowed, Detail: r.Method + " is not allowed on " + r.URL.Path})
}

// bodyBuffers holds the buffers request bodies are read into; one larger
// than maxPooledBody is left to the garbage collector.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 64 << 10

// maxBodyDepth bounds how deeply a request body nests JSON objects and
// arrays.
const maxBodyDepth = sampler.MaxSchemaDepth + 16

// decodeBody reads a JSON body of at most maxBody bytes into dst. With
// strict set, unknown top-level members are errors; nested MCP objects stay
// open, as MCP leaves them.
func (s *server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, strict bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &bodyError{status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type",
				title: "Unsupported media type", detail: "send the body as application/json"}
		}
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.maxBody)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &bodyError{status: http.StatusRequestEntityTooLarge, slug: "body-too-large", title: "Request body too large",
				detail: fmt.Sprintf("the body exceeds %d bytes", s.maxBody)}
		}
		return fmt.Errorf("read body: %w", err)
	}
	// encoding/json allows 10000 levels; a body has no use for more than
	// a schema's (sampler.MaxSchemaDepth) and a few of its own.
	if d := sampler.JSONDepth(buf.Bytes()); d > maxBodyDepth {
		return badJSON("/", fmt.Sprintf("the body nests %d levels deep; the limit is %d", d, maxBodyDepth))
	}
	body := buf.Bytes()
	if len(bytes.TrimSpace(body)) == 0 {
		return badJSON("/", "the body is empty; send a JSON object")
	}
	// Decoding copies what it keeps (strings, json.RawMessage): buf can be
	// reused once it is done. The token reader consumes buf; body keeps
	// its bytes for the decoder below.
	if tr, ok := dst.(tokenReader); ok {
		if sampler.ReadAll(buf, func(d *jsontext.Decoder) bool { return tr.readTokens(d, strict) }) {
			return nil
		}
		tr.reset()
	}
	opts := sampler.V1Options
	if strict {
		// Nested MCP objects decode themselves and stay open.
		opts = strictBodyOptions
	}
	if err := jsonv2.Unmarshal(body, dst, opts); err != nil {
		var syn *jsontext.SyntacticError
		if errors.As(err, &syn) && syn.ByteOffset > 0 && jsontext.Value(body[:syn.ByteOffset]).IsValid(sampler.V1Options) {
			return badJSON("/", "the body holds more than one JSON value")
		}
		return jsonError("", err)
	}
	return nil
}

// tokenReader is a body that reads itself token by token, as decodeBody's
// reflecting decoder would read it, or reports false (see
// sampler.ReadObject); reset empties it for that decoder.
type tokenReader interface {
	readTokens(d *jsontext.Decoder, strict bool) bool
	reset()
}

// strictBodyOptions read a body as sampler.V1Options do and refuse
// unknown members, as json.Decoder.DisallowUnknownFields did.
var strictBodyOptions = jsonv2.JoinOptions(sampler.V1Options, jsonv2.RejectUnknownMembers(true))

// decodeItems decodes each element of a JSON array member on its own, so
// that errors name the element: /tools/2/name.
func decodeItems[T any](member string, raw []json.RawMessage) ([]T, []sampler.FieldError) {
	if raw == nil {
		return nil, nil
	}
	out := make([]T, len(raw))
	var errs []sampler.FieldError
	for i, item := range raw {
		if err := jsonv2.Unmarshal(item, &out[i], sampler.V1Options); err != nil {
			var be *bodyError
			if errors.As(jsonError(fmt.Sprintf("/%s/%d", member, i), err), &be) {
				errs = append(errs, be.errors...)
			}
		}
	}
	return out, errs
}

func badJSON(path, msg string) error {
	return &bodyError{status: http.StatusBadRequest, slug: "invalid-request", title: "Invalid request",
		detail: path + ": " + msg, errors: []sampler.FieldError{{Path: path, Message: msg}}}
}

// jsonError turns an error of the v2 decoder into a 400 naming the path;
// base is the JSON Pointer of the value that was decoded. The decoder's
// errors carry the JSON Pointer of the value that failed and wrap what a
// type's own UnmarshalJSON returned: a PathError, an InvalidError, or
// encoding/json's UnmarshalTypeError (which names a Go field path).
func jsonError(base string, err error) error {
	var (
		sem *jsonv2.SemanticError
		syn *jsontext.SyntacticError
		typ *json.UnmarshalTypeError
		pe  *sampler.PathError
		inv *sampler.InvalidError
	)
	if errors.As(err, &sem) {
		base += string(sem.JSONPointer)
	}
	switch {
	case errors.As(err, &inv):
		return inv
	case errors.As(err, &pe):
		return badJSON(orRoot(base+pe.Path), pe.Message)
	case errors.As(err, &typ):
		return badJSON(orRoot(base+dotsToPointer(typ.Field)), fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value))
	case sem != nil && errors.Is(sem.Err, jsonv2.ErrUnknownName):
		name := sem.JSONPointer.LastToken()
		return badJSON(orRoot(base), fmt.Sprintf("unknown member %q", name))
	case sem != nil && sem.GoType != nil && sem.JSONKind != 0:
		return badJSON(orRoot(base), fmt.Sprintf("must be %s, not %s", jsonKind(sem.GoType.Kind().String()), kindOf(sem)))
	case errors.As(err, &syn):
		return badJSON(orRoot(base), fmt.Sprintf("not valid JSON (at byte %d)", syn.ByteOffset))
	case sem != nil && sem.Err != nil:
		return badJSON(orRoot(base), sem.Err.Error())
	default:
		return badJSON(orRoot(base), err.Error())
	}
}

// kindOf names the JSON value a v2 semantic error could not decode, as
// encoding/json's UnmarshalTypeError does: "string", "number 1.5", ...
func kindOf(sem *jsonv2.SemanticError) string {
	switch sem.JSONKind {
	case '"':
		return "string"
	case '0':
		if len(sem.JSONValue) > 0 {
			return "number " + string(sem.JSONValue)
		}
		return "number"
	case 't', 'f':
		return "bool"
	case '[':
		return "array"
	case '{':
		return "object"
	case 'n':
		return "null"
	}
	return sem.JSONKind.String()
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "a " + k
}

func dotsToPointer(field string) string {
	if field == "" {
		return ""
	}
	return "/" + strings.ReplaceAll(field, ".", "/")
}

func (s *server) writeJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, jsonMediaType, v)
}

// Media types of responses; read-only, shared by every response.
var (
	jsonMediaType    = []string{"application/json"}
	problemMediaType = []string{"application/problem+json"}
)

// writeBody writes v as JSON with its Content-Length and sends it: the
// response is complete, and what the handler and instrument do after it
// (counting, logging) is off the client's path.
func writeBody(w http.ResponseWriter, status int, contentType []string, v any) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	if err := encodeBody(buf, v); err != nil {
		// Only a value sampled made itself can fail to encode.
		status, contentType = http.StatusInternalServerError, problemMediaType
		buf.Reset()
		buf.WriteString(`{"type":"` + problemBase + `internal","title":"Internal error","status":500}` + "\n")
	}
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Length"] = []string{strconv.Itoa(buf.Len())}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	_ = http.NewResponseController(w).Flush()
}

// jsonAppender is a body that appends its own JSON (resultBody, on the
// path of every sampling answer), as encoding/json would write it.
type jsonAppender interface {
	AppendJSON(buf []byte) ([]byte, error)
}

// encodeBody writes v's JSON and a newline to buf, as json.Encoder does.
func encodeBody(buf *bytes.Buffer, v any) error {
	a, ok := v.(jsonAppender)
	if !ok {
		return json.NewEncoder(buf).Encode(v)
	}
	b, err := a.AppendJSON(buf.AvailableBuffer())
	if err != nil {
		return err
	}
	buf.Write(b)
	return buf.WriteByte('\n')
}

func (s *server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers whether the service can serve (s.ready), and shows
// the MCP servers: one that is down and not required degrades the service
// without failing readiness, and is named in "degraded". /readyz is open
// to callers without a key, so why a server is down (an error that may
// name internal addresses) is left to GET /v1/tools.
func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	var servers []tools.ServerStatus
	if s.tools != nil {
		servers = s.tools.Status()
		for i := range servers {
			servers[i].Error = ""
		}
	}
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			p := Problem{Type: problemBase + "not-ready", Title: "Not ready", Status: http.StatusServiceUnavailable, Detail: err.Error()}
			if servers != nil {
				p.Extensions = map[string]any{"mcpServers": servers}
			}
			s.writeProblem(w, r, p)
			return
		}
	}
	body := map[string]any{"status": "ready"}
	if servers != nil {
		body["mcpServers"] = servers
		var degraded []string
		for _, st := range servers {
			if !st.Connected {
				degraded = append(degraded, st.Name)
			}
		}
		if degraded != nil {
			body["degraded"] = degraded
		}
	}
	s.writeJSON(w, http.StatusOK, body)
}

func (s *server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(api.Spec())
}

// modelInfo is one entry of GET /v1/models.
type modelInfo struct {
	ID string `json:"id"`
	sampler.Model
	Default bool `json:"default"`
}

func (s *server) handleModels(w http.ResponseWriter, r *http.Request) {
	cat := s.sampler.Catalog()
	def := cat.Default().ID()
	var out []modelInfo
	for _, m := range cat.Models() {
		out = append(out, modelInfo{ID: m.ID(), Model: m, Default: m.ID() == def})
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"models": out, "default": def})
}
