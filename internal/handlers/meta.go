package handlers

import (
	"net/http"

	"github.com/sampled/sampled/api"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

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
