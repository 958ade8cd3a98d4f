package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
)

func (s *server) writeJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, jsonMediaType, v)
}

// Media types of responses; read-only, shared by every response.
var (
	jsonMediaType    = []string{"application/json"}
	problemMediaType = []string{"application/problem+json"}
)

// writeBody writes v as JSON, and a newline, with its Content-Length and
// sends it: the response is complete, and what the handler and instrument
// do after it (counting, logging) is off the client's path.
func writeBody(w http.ResponseWriter, status int, contentType []string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a value sampled made itself can fail to encode.
		status, contentType = http.StatusInternalServerError, problemMediaType
		b, _ = json.Marshal(Problem{Type: problemBase + "internal", Title: "Internal error", Status: status})
	}
	b = append(b, '\n')
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_ = http.NewResponseController(w).Flush()
}
