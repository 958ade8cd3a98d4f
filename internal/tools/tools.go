// Package tools is where tool loops find their tools: MCP client sessions
// to the configured servers (stdio child processes and streamable HTTP
// endpoints) and the built-in "std" server, which runs in-process. A
// [Registry] connects to them, keeps their tool lists fresh (on
// notifications/tools/list_changed and on every reconnect), reconnects with
// backoff, and calls tools by their exposed names.
//
// Every tool is exposed as "<server>__<tool>", mapped by [ExposedName] into
// the names providers accept.
package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/metrics"
	"github.com/sampled/sampled/internal/sampler"
)

// Sentinel errors of [Registry.Call]; test for them with errors.Is.
var (
	// ErrUnknownTool means no connected or listed server offers the tool.
	ErrUnknownTool = errors.New("tools: unknown tool")
	// ErrUnavailable means the tool's server is not connected now (it
	// failed to start, died, or its transport broke); a later call may
	// succeed once the registry has reconnected.
	ErrUnavailable = errors.New("tools: MCP server unavailable")
)

// Transport kinds reported in [ServerStatus.Transport].
const (
	TransportStdio   = "stdio"
	TransportHTTP    = "http"
	TransportBuiltin = "builtin"
)

// StdServer is the name of the built-in server; its tools are exposed as
// "std__calculate" and so on. A configured server may not use this name
// unless [Options.DisableStd] is set.
const StdServer = "std"

// Protocol versions sampled offers its MCP servers (mcpServers.<name>.
// protocolVersion). ProtocolVersion, the default, is 2025-11-25 rather than
// go-sdk's newest: 2026-07-28 deprecates push-style sampling and drops the
// standalone SSE stream and the keep-alive pings by which the registry
// notices an HTTP server that went away. A server configured with
// ProtocolVersionMRTR is offered 2026-07-28; its sampling requests come as
// "input required" results of tool calls, which go-sdk fulfils with the
// same sampling handler. sampled accepts the version a server answers if
// go-sdk supports it and it is not newer than the one offered; a server
// answering a newer one is disconnected with an error saying so.
const (
	ProtocolVersion     = "2025-11-25"
	ProtocolVersionMRTR = "2026-07-28"
)

// Tool is one tool a loop can call.
type Tool struct {
	// Name is the exposed name, "<server>__<tool>" mapped by [ExposedName].
	Name string `json:"name"`
	// Server is the name of the MCP server offering the tool.
	Server string `json:"server"`
	// Original is the tool's name on its server.
	Original string `json:"original"`
	// Description is the server's description of the tool, if any.
	Description string `json:"description,omitempty"`
	// InputSchema is the tool's JSON Schema for its arguments, never empty
	// ({"type":"object"} when the server gave none). Callers must not
	// modify it.
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Result is a tool call's outcome in MCP terms: the content of a
// tool_result block.
type Result struct {
	// Content is the result's content blocks, converted losslessly from
	// the server's; empty but non-nil when the server sent none.
	Content []sampler.Content
	// StructuredContent is the result's structuredContent as JSON; nil
	// when the server sent none.
	StructuredContent json.RawMessage
	// IsError reports a tool-level error: the tool ran and failed, and
	// Content says why (for the model to read).
	IsError bool
}

// ServerStatus reports one MCP server for /readyz and GET /v1/tools.
type ServerStatus struct {
	// Name is the server's key in mcpServers, or StdServer.
	Name string `json:"name"`
	// Transport is TransportStdio, TransportHTTP or TransportBuiltin.
	Transport string `json:"transport"`
	// Connected reports a live, initialized session whose tools can be
	// called.
	Connected bool `json:"connected"`
	// Error says why a server is not connected ("connecting" before the
	// first attempt ends); empty when it is.
	Error string `json:"error,omitempty"`
	// Tools counts the server's listed tools; a disconnected server keeps
	// the tools it listed last.
	Tools int `json:"tools"`
	// Required reports the server's [ServerOptions.Required]: while a
	// required server is not connected the registry is not ready.
	Required bool `json:"required"`
}

// ServerOptions say how to reach one MCP server: Command (with Args and
// Env) starts it as a child speaking stdio; else URL (with Headers) is its
// streamable HTTP endpoint. One of the two is set.
type ServerOptions struct {
	// Command, Args and Env start a stdio server; Env adds to the minimal
	// environment it gets (PATH, HOME, USER, LANG and TMPDIR of sampled's).
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach a streamable HTTP server; the headers are
	// added to every request.
	URL     string
	Headers map[string]string
	// ProtocolVersion is the MCP version offered to the server: "" means
	// [ProtocolVersion], or [ProtocolVersionMRTR].
	ProtocolVersion string
	// Required makes [Registry.Ready] fail while the server is not
	// connected; by default a server that is down only degrades the
	// registry.
	Required bool
}

// Options configures [New]. The zero value runs the built-in std server
// alone, records no metrics and logs nothing.
type Options struct {
	// Servers are the MCP servers to connect, by name.
	Servers map[string]ServerOptions
	// DisableStd turns the built-in "std" server off; it is on unless set.
	DisableStd bool
	// Metrics records tool calls and server state; nil records nothing.
	Metrics *metrics.Metrics
	// Logger receives connection events and the stderr of stdio servers;
	// nil discards.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the reconnect backoff (exponential,
	// with full jitter); 0 means 500ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Now is the clock of the std "now" tool; nil means time.Now.
	Now func() time.Time
}

// maxNameLen is the longest tool name OpenAI and Anthropic accept.
const maxNameLen = 64

// ExposedName returns the name under which the registry exposes a server's
// tool: "<server>__<tool>" with every character outside [A-Za-z0-9_-]
// replaced by "_". A name longer than 64 characters is cut to 55 and
// suffixed with "_" and 8 hex digits of the SHA-256 of the unmapped
// "<server>__<tool>", so that it is stable and long names sharing a prefix
// stay distinct.
func ExposedName(server, tool string) string {
	full := server + "__" + tool
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, full)
	if len(name) <= maxNameLen {
		return name
	}
	return hashedName(name, full)
}

// hashedName cuts name to at most 55 characters and appends "_" and 8 hex
// digits of the SHA-256 of key.
func hashedName(name, key string) string {
	sum := sha256.Sum256([]byte(key))
	return name[:min(len(name), maxNameLen-9)] + "_" + hex.EncodeToString(sum[:4])
}
