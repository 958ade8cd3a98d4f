package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// primeRetry is the retry field of a stream's priming event: how long a
// client that lost the stream waits before resuming it with Last-Event-ID.
const primeRetry = time.Second

// maxBody bounds a POST's body, as go-sdk's default does.
const maxBody = mcp.DefaultMaxRequestBodyBytes

// codeTransport is the JSON-RPC code of the transport's other errors (a
// wrong header, a missing session), in the range JSON-RPC leaves to
// servers, as the TypeScript SDK sends them.
const codeTransport = -32000

// ServeHTTP serves the streamable HTTP transport at /mcp. It refuses
// requests whose Origin header names a site that is neither loopback nor
// allowed: a web page cannot reach a local sampled through DNS rebinding
// or a browser's cross-site request (the go-sdk handler checks the Host
// header of requests to a loopback address too). A session belongs to the
// key that opened it: a request of another key is told it does not exist.
// Before go-sdk reads a POST, its message is checked as JSON-RPC and MCP
// ask; every error is a JSON-RPC error response, but a session's 404, whose
// text body go-sdk's clients read as the session's end.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
		s.log.Warn("origin refused", "origin", origin)
		writeError(w, http.StatusForbidden, jsonrpc.ID{}, codeTransport, "Forbidden: origin not allowed")
		return
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" && !s.owns(r, id) {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodPost && !s.admit(w, r) {
		return
	}
	rw := &writer{ResponseWriter: w}
	s.handler.ServeHTTP(rw, r)
	rw.finish()
}

// owns reports whether the session id exists and belongs to the caller of
// r. Without keys every session is everyone's.
func (s *Server) owns(r *http.Request, id string) bool {
	if s.o.Access == nil {
		return true
	}
	owner, ok := s.owners.Load(id)
	return ok && owner == s.callerName(r.Header)
}

// callerName is the name of the key of a request's Authorization header,
// "" when it has none that counts (the handlers refused those already).
func (s *Server) callerName(h http.Header) string {
	c, err := s.o.Access.Authenticate(h.Get("Authorization"))
	if err != nil {
		return ""
	}
	return c.Name()
}

// bind is a receiving middleware that records the owner of each session,
// the key of its initialize request, before its answer tells the session's
// id, and forgets it when the session ends.
func (s *Server) bind(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.ServerRequest[*mcp.InitializeParams]); ok && s.o.Access != nil && r.Extra != nil {
			ss := r.Session
			if _, loaded := s.owners.LoadOrStore(ss.ID(), s.callerName(r.Extra.Header)); !loaded {
				go func() {
					_ = ss.Wait()
					s.owners.Delete(ss.ID())
				}()
			}
		}
		return next(ctx, method, req)
	}
}

// message is a JSON-RPC message as the transport reads it.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// admit checks the message of a POST before go-sdk reads it, and answers
// those go-sdk would answer wrongly: JSON that does not parse (-32700), a
// message that is neither request, notification nor response (-32600), a
// request of a method the server does not have (-32601), a notification it
// does not know (202, ignored), and a message without a session but
// initialize (400). Batches, which revisions before 2025-06-18 have, are
// go-sdk's to check. It reports whether go-sdk should serve r, whose body it
// restores.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, codeTransport, "the body exceeds "+strconv.FormatInt(maxBody, 10)+" bytes")
		}
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !json.Valid(body) {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: the body is not JSON")
		return false
	}
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		return true // a batch: go-sdk serves them to sessions before 2025-06-18
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Invalid Request: a message is a JSON object")
		return false
	}
	id, idErr := messageID(m.ID)
	invalid := func(why string) bool {
		writeError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+why)
		return false
	}
	var method string
	switch {
	case m.JSONRPC != "2.0":
		return invalid(`"jsonrpc" must be "2.0"`)
	case idErr != nil:
		return invalid(idErr.Error())
	case m.Method == nil && (!id.IsValid() || (m.Result == nil) == (m.Error == nil)):
		return invalid("a message without a method is a response: an id and either result or error")
	case m.Method != nil && json.Unmarshal(m.Method, &method) != nil:
		return invalid(`"method" must be a string`)
	case r.Header.Get("Mcp-Session-Id") == "" && method != "initialize" && method != "server/discover":
		writeError(w, http.StatusBadRequest, id, codeTransport, "Bad Request: Mcp-Session-Id header is required (initialize opens a session)")
		return false
	case m.Method == nil:
		return true // a response to one of the server's requests
	}
	request, notification := received(method)
	switch {
	case m.ID == nil && !notification:
		w.WriteHeader(http.StatusAccepted) // MCP: an unknown notification is ignored
		return false
	case m.ID != nil && notification:
		return invalid(method + " is a notification: it has no id")
	case m.ID != nil && !request:
		writeError(w, http.StatusOK, id, jsonrpc.CodeMethodNotFound, "Method not found: "+method)
		return false
	}
	return true
}

// messageID reads a message's id: absent, a string or an integer, as MCP
// allows (JSON-RPC's null is not).
func messageID(raw json.RawMessage) (jsonrpc.ID, error) {
	if raw == nil {
		return jsonrpc.ID{}, nil
	}
	var v any
	_ = json.Unmarshal(raw, &v) // the body is valid JSON
	switch v := v.(type) {
	case string:
		return jsonrpc.MakeID(v)
	case float64:
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return jsonrpc.MakeID(float64(n))
		}
	}
	return jsonrpc.ID{}, errors.New(`"id" must be a string or an integer`)
}

// received says whether go-sdk v1.8.0's server receives method as a
// request or as a notification: the client's methods of MCP's 2025-11-25
// schema that it serves, and 2026-07-28's server/discover, which tells a
// newer client to fall back to initialize.
func received(method string) (request, notification bool) {
	switch method {
	case "initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list",
		"resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
		"logging/setLevel", "completion/complete", "server/discover":
		return true, false
	case "notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed":
		return false, true
	}
	return false, false
}

// errorResponse is a JSON-RPC error response; its id is null when the
// request's could not be read.
type errorResponse struct {
	JSONRPC string        `json:"jsonrpc"`
	ID      any           `json:"id"`
	Error   jsonrpc.Error `json:"error"`
}

// writeError writes a JSON-RPC error response with an HTTP status.
func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorResponse{JSONRPC: "2.0", ID: id.Raw(), Error: jsonrpc.Error{Code: code, Message: text}})
}

// writer is the ResponseWriter go-sdk writes through. It turns go-sdk's
// plain-text errors (http.Error) into JSON-RPC error responses, but a
// session's 404, and adds a retry field to the priming event that starts
// a POST's event stream (go-sdk writes it without one).
type writer struct {
	http.ResponseWriter
	status  int           // of a plain-text error held back
	text    *bytes.Buffer // its text, while held back
	started bool          // the body has begun
}

// WriteHeader holds back a plain-text error's status.
func (w *writer) WriteHeader(status int) {
	if status >= 400 && status != http.StatusNotFound && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status, w.text = status, &bytes.Buffer{}
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write holds back a plain-text error's text, and adds the retry field to
// the priming event, which go-sdk writes whole, first.
func (w *writer) Write(b []byte) (int, error) {
	if w.text != nil {
		return w.text.Write(b)
	}
	if first := !w.started; first {
		w.started = true
		if rest, ok := bytes.CutPrefix(b, []byte("event: prime\n")); ok {
			primed := append([]byte("event: prime\nretry: "+strconv.FormatInt(primeRetry.Milliseconds(), 10)+"\n"), rest...)
			if _, err := w.ResponseWriter.Write(primed); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the response.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the error held back as a JSON-RPC error response.
func (w *writer) finish() {
	if w.text == nil {
		return
	}
	code := int64(codeTransport)
	if w.status == http.StatusBadRequest {
		code = jsonrpc.CodeInvalidRequest
	}
	writeError(w.ResponseWriter, w.status, jsonrpc.ID{}, code, cmp.Or(strings.TrimSpace(w.text.String()), http.StatusText(w.status)))
}
