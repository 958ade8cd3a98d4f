package handlers

import (
	"net/http"
)

// routes lists every route of the service on one screen.
func (s *server) routes() http.Handler {
	r := s.mux
	r.Use(s.instrument, s.recoverer, s.authenticate)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	r.Method(http.MethodGet, "/metrics", s.metricsHandler)
	r.Get("/openapi.yaml", s.handleOpenAPI)

	r.Get("/v1/models", s.handleModels)
	r.With(s.limitSampling).Post("/v1/sample", s.handleSample)
	r.With(s.limitSampling).Post("/v1/sample/schema", s.handleSampleSchema)
	r.With(s.limitSampling).Post("/v1/sample/tools", s.handleSampleTools)
	r.With(s.limitSampling).Post("/v1/messages", s.handleMessages)

	r.Get("/v1/tools", s.handleTools)
	r.Post("/v1/loops", s.handleStartLoop)
	r.Get("/v1/loops", s.handleListLoops)
	r.Get("/v1/loops/{id}", s.handleGetLoop)
	r.Delete("/v1/loops/{id}", s.handleCancelLoop)
	r.Get("/v1/loops/{id}/events", s.handleLoopEvents)

	r.Method(http.MethodGet, "/mcp", s.mcp) // the MCP server's streamable HTTP transport
	// A POST carries the MCP calls, tools that sample among them: it takes
	// a place of the in-flight cap as the other sampling routes do.
	r.With(s.limitSampling).Method(http.MethodPost, "/mcp", s.mcp)
	r.Method(http.MethodDelete, "/mcp", s.mcp)
	return r
}
