package handlers

import (
	"encoding/json"
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
	raw, err := s.readBody(w, r)
	var body *sampler.CreateMessageParams
	var stream bool
	if err == nil {
		body, stream, err = decodeMessages(raw)
	}
	if err != nil {
		s.writeErrorAs(w, r, err, messagesProblem)
		return
	}
	p, err := body.Params()
	if err != nil {
		s.writeErrorAs(w, r, err, messagesProblem)
		return
	}
	p.Caller = "messages"
	if wantsStream(r, stream) {
		l := &live{eventStream: eventStream{s: s, w: w, r: r}, problem: messagesProblem}
		l.stream(p)
		res, err := s.sampler.Sample(r.Context(), p)
		s.sampled(r.Context(), p, res, err)
		var result any
		if err == nil {
			result = sampler.CreateMessageResultOf(res)
		}
		l.finish(result, err)
		return
	}
	res, err := s.sampler.Sample(r.Context(), p)
	s.sampled(r.Context(), p, res, err)
	setCost(w, res, err)
	if err != nil {
		s.writeErrorAs(w, r, err, messagesProblem)
		return
	}
	s.writeJSON(w, http.StatusOK, sampler.CreateMessageResultOf(res))
}

// messagesProblem is the problem of POST /v1/messages for err: a 400
// carries JSON-RPC's invalid-params code.
func messagesProblem(err error) Problem {
	p := problemFor(err)
	if p.Status == http.StatusBadRequest {
		if p.Extensions == nil {
			p.Extensions = map[string]any{}
		}
		p.Extensions["code"] = invalidParams
	}
	return p
}

// decodeMessages reads the params of POST /v1/messages and their one
// extension, stream. MCP leaves the params open, for extensions; this
// endpoint takes no other. A body that fails, and is in the shape of
// Anthropic's Messages API, gets anthropicShaped's error instead.
func decodeMessages(raw []byte) (*sampler.CreateMessageParams, bool, error) {
	var body sampler.CreateMessageParams
	var stream bool
	err := decodeJSON(raw, &body, false)
	if err == nil {
		stream, err = takeStream(body.Extra)
	}
	if err == nil && len(body.Extra) > 0 {
		var errs []sampler.FieldError
		for _, k := range slices.Sorted(maps.Keys(body.Extra)) {
			errs = append(errs, sampler.FieldError{Path: "/" + jsonpointer.EscapeToken(k), Message: fmt.Sprintf("unknown member %q", k)})
		}
		err = sampler.InvalidAll(errs)
	}
	if err != nil {
		if aerr := anthropicShaped(raw); aerr != nil {
			return nil, false, aerr
		}
		return nil, false, err
	}
	return &body, stream, nil
}

// anthropicShaped refuses a body in the shape of Anthropic's Messages API
// (max_tokens, a system string, a message whose content is a string), a
// likely mistake given the route's name, saying what the route takes.
func anthropicShaped(body []byte) error {
	var b struct {
		MaxTokens json.RawMessage `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil // not an object of that shape: decoding says what is wrong
	}
	var errs []sampler.FieldError
	if b.MaxTokens != nil {
		errs = append(errs, sampler.FieldError{Path: "/max_tokens", Message: "Anthropic's member; MCP's is maxTokens"})
	}
	if b.System != nil {
		errs = append(errs, sampler.FieldError{Path: "/system", Message: "Anthropic's member; MCP's is systemPrompt"})
	}
	for i, m := range b.Messages {
		if len(m.Content) > 0 && m.Content[0] == '"' {
			errs = append(errs, sampler.FieldError{Path: fmt.Sprintf("/messages/%d/content", i),
				Message: `a string is Anthropic's shorthand; MCP's content is a block such as {"type":"text","text":"…"}, or an array of blocks`})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &sampler.InvalidError{Errors: errs, Detail: "this route takes MCP's CreateMessageRequest, not Anthropic's Messages API: " +
		"send maxTokens, systemPrompt and content blocks, or use POST /v1/sample (sampled's own shape) or POST /openai/v1/chat/completions (OpenAI's)"}
}

// takeStream removes the stream member from a body's extra members and
// returns its value.
func takeStream(extra map[string]json.RawMessage) (bool, error) {
	raw, ok := extra["stream"]
	if !ok {
		return false, nil
	}
	delete(extra, "stream")
	var stream bool
	if err := json.Unmarshal(raw, &stream); err != nil {
		return false, sampler.Invalid("/stream", "stream must be true or false")
	}
	return stream, nil
}
