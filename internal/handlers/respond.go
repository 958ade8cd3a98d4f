package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sampled/sampled/internal/bufpool"
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
	buf := bodyBuffers.Get()
	defer bodyBuffers.Put(buf)
	// Encode, unlike Marshal, writes into the pooled buffer: no copy of
	// the body is made. Its output is Marshal's and a newline.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		// Only a value sampled made itself can fail to encode.
		status, contentType = http.StatusInternalServerError, problemMediaType
		buf.Reset()
		_ = json.NewEncoder(buf).Encode(Problem{Type: problemBase + "internal", Title: "Internal error", Status: status})
	}
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Length"] = []string{strconv.Itoa(buf.Len())}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	_ = http.NewResponseController(w).Flush()
}

// bodyBuffers holds the buffers response bodies are encoded into; one
// past 64 KiB is not kept.
var bodyBuffers = bufpool.Pool{Max: 64 << 10}
