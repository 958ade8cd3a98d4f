package handlers

import (
	"net/http"
	"slices"
	"strings"

	"github.com/sampled/sampled/internal/console"
)

// route is one operation of the service: a method, a net/http.ServeMux
// path pattern and its handler.
type route struct {
	method, path string
	h            http.Handler
}

// table lists every route of the service on one screen.
func (s *server) table() []route {
	sampling := func(h http.HandlerFunc) http.Handler { return s.limitSampling(h) }
	page := console.Handler(http.HandlerFunc(s.notFound))
	return []route{
		{http.MethodGet, "/healthz", http.HandlerFunc(s.handleHealthz)},
		{http.MethodGet, "/readyz", http.HandlerFunc(s.handleReadyz)},
		{http.MethodGet, "/metrics", s.metricsHandler},
		{http.MethodGet, "/openapi.yaml", http.HandlerFunc(s.handleOpenAPI)},

		{http.MethodGet, "/v1/models", http.HandlerFunc(s.handleModels)},
		{http.MethodPost, "/v1/sample", sampling(s.handleSample)},
		{http.MethodPost, "/v1/sample/schema", sampling(s.handleSampleSchema)},
		{http.MethodPost, "/v1/sample/tools", sampling(s.handleSampleTools)},
		{http.MethodPost, "/v1/messages", sampling(s.handleMessages)},

		{http.MethodGet, "/v1/keys/self", http.HandlerFunc(s.handleKeySelf)},
		{http.MethodGet, "/v1/tools", http.HandlerFunc(s.handleTools)},
		{http.MethodPost, "/v1/loops", http.HandlerFunc(s.handleStartLoop)},
		{http.MethodGet, "/v1/loops", http.HandlerFunc(s.handleListLoops)},
		{http.MethodGet, "/v1/loops/{id}", http.HandlerFunc(s.handleGetLoop)},
		{http.MethodDelete, "/v1/loops/{id}", http.HandlerFunc(s.handleCancelLoop)},
		{http.MethodGet, "/v1/loops/{id}/events", http.HandlerFunc(s.handleLoopEvents)},

		{http.MethodGet, "/mcp", s.mcp}, // the MCP server's streamable HTTP transport
		// A POST carries the MCP calls, tools that sample among them: it
		// takes a place of the in-flight cap as the other sampling routes do.
		{http.MethodPost, "/mcp", s.limitSampling(s.mcp)},
		{http.MethodDelete, "/mcp", s.mcp},

		// The web console: its page and its assets, which call the routes
		// above from the browser.
		{http.MethodGet, "/console", page},
		{http.MethodGet, "/console/{file}", page},
	}
}

// openaiTable lists the routes of OpenAI's Chat Completions dialect,
// under the prefix an OpenAI SDK takes as its base URL. OpenAI's API
// description documents them (reference/openai/openapi.yaml), not
// api/openapi.yaml; their errors take OpenAI's shape (writeProblem).
func (s *server) openaiTable() []route {
	sampling := func(h http.HandlerFunc) http.Handler { return s.limitSampling(h) }
	return []route{
		{http.MethodGet, "/openai/v1/models", http.HandlerFunc(s.handleOpenAIModels)},
		{http.MethodPost, "/openai/v1/chat/completions", sampling(s.handleOpenAIChat)},
	}
}

// routes serves the tables (table, openaiTable) through a
// net/http.ServeMux. Every path also has a pattern without a method, more
// specific than "/" and less than the path's own methods, that answers
// other methods with a 405 problem (HEAD among them: the GET routes do not
// serve it); "/" answers the rest with a 404 problem. instrument labels
// requests by the table's route that served them (s.labels), the others as
// "unmatched".
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	s.labels = map[string]string{}
	for _, rt := range append(s.table(), s.openaiTable()...) {
		pattern := rt.method + " " + rt.path
		mux.Handle(pattern, rt.h)
		s.labels[pattern] = rt.path
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for path, methods := range allowed {
		slices.SortFunc(methods, func(a, b string) int { return methodOrder(a) - methodOrder(b) })
		allow := strings.Join(methods, ", ")
		wrong := func(w http.ResponseWriter, r *http.Request) { s.methodNotAllowed(w, r, allow) }
		mux.HandleFunc(path, wrong)
		if slices.Contains(methods, http.MethodGet) {
			mux.HandleFunc(http.MethodHead+" "+path, wrong) // a GET pattern alone would serve it
		}
	}
	mux.HandleFunc("/", s.notFound)
	// The mux would redirect a path with empty, "." or ".." segments to
	// its clean form, with a 301 that is no problem document and that
	// turns a POST into a GET, and answer a request for "*" (but OPTIONS,
	// which net/http's server answers itself) with a bare 400: no route has
	// such paths, so they are not found.
	clean := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.Contains(p, "/.") {
			s.notFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return s.instrument(s.recoverer(s.authenticate(clean)))
}

// methodOrder orders the methods of an Allow header.
func methodOrder(m string) int {
	return slices.Index([]string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}, m)
}

// routeLabel is the route a request is counted and logged under: the path
// of the table's route whose pattern the mux matched (it sets r.Pattern on
// the request it is given), or "unmatched" for the requests no route took:
// the 404 and 405 answers, and those turned away before routing.
func (s *server) routeLabel(r *http.Request) string {
	if label, ok := s.labels[r.Pattern]; ok {
		return label
	}
	return "unmatched"
}
