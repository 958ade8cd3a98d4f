package handlers

import (
	"net/http"

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
	var errs []sampler.FieldError
	if body.Messages == nil {
		errs = append(errs, sampler.FieldError{Path: "/messages", Message: "messages is required"})
	}
	if body.MaxTokens == nil {
		errs = append(errs, sampler.FieldError{Path: "/maxTokens", Message: "maxTokens is required"})
	}
	switch body.IncludeContext {
	case "", "none", "thisServer", "allServers":
	default:
		errs = append(errs, sampler.FieldError{Path: "/includeContext", Message: "includeContext must be none, thisServer or allServers"})
	}
	if len(errs) > 0 {
		s.writeMessagesError(w, r, sampler.InvalidAll(errs))
		return
	}
	p := &sampler.Params{
		Request: sampler.Request{
			Messages:      body.Messages,
			SystemPrompt:  body.SystemPrompt,
			MaxTokens:     *body.MaxTokens,
			Temperature:   body.Temperature,
			StopSequences: body.StopSequences,
			Metadata:      body.Metadata,
			Tools:         body.Tools,
			ToolChoice:    body.ToolChoice,
		},
		ModelPreferences: body.ModelPreferences,
		Endpoint:         "messages",
	}
	res, err := s.sampler.Sample(r.Context(), p)
	logSample(r.Context(), p, res, err)
	if err != nil {
		s.writeMessagesError(w, r, err)
		return
	}
	out := sampler.CreateMessageResult{Role: res.Role, Content: res.Content, Model: res.Model, StopReason: res.StopReason}
	if len(out.Content) == 0 {
		out.Content = []sampler.Content{sampler.TextBlock("")}
	}
	s.writeJSON(w, http.StatusOK, out)
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
