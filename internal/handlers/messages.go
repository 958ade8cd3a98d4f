package handlers

import (
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/kaptinlin/jsonpointer"

	"github.com/sampled/sampled/internal/sampler"
)

// invalidParams is JSON-RPC's code for invalid params, carried by 400
// problems of POST /v1/messages.
const invalidParams = -32602

func (s *server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var body sampler.CreateMessageParams
	if err := s.decodeBody(w, r, &body, false); err != nil {
		s.writeMessagesError(w, r, err)
		return
	}
	// MCP leaves the params open, for extensions; this endpoint takes none.
	if len(body.Extra) > 0 {
		var errs []sampler.FieldError
		for _, k := range slices.Sorted(maps.Keys(body.Extra)) {
			errs = append(errs, sampler.FieldError{Path: "/" + jsonpointer.EscapeToken(k), Message: fmt.Sprintf("unknown member %q", k)})
		}
		s.writeMessagesError(w, r, sampler.InvalidAll(errs))
		return
	}
	p, err := body.Params()
	if err != nil {
		s.writeMessagesError(w, r, err)
		return
	}
	p.Caller = "messages"
	res, err := s.sampler.Sample(r.Context(), p)
	s.sampled(r.Context(), p, res, err)
	if err != nil {
		s.writeMessagesError(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, sampler.CreateMessageResultOf(res))
}

// writeMessagesError adds JSON-RPC's invalid-params code to 400 problems.
func (s *server) writeMessagesError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if p.Status != http.StatusBadRequest {
		s.writeError(w, r, err)
		return
	}
	if p.Extensions == nil {
		p.Extensions = map[string]any{}
	}
	p.Extensions["code"] = invalidParams
	s.writeProblem(w, r, p)
}
