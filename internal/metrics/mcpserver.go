package metrics

import "github.com/prometheus/client_golang/prometheus"

// initMCPServer creates the collectors of sampled's MCP server (/mcp).
// Label values are bounded: tool is one of the server's tool names, sampler
// is client, service or none, outcome one of the server's outcomes.
func (m *Metrics) initMCPServer() {
	m.MCPToolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sampled_mcp_tool_calls_total",
		Help: "Calls of the MCP server's tools, by tool, who sampled (client, service, none) and outcome.",
	}, []string{"tool", "sampler", "outcome"})
	m.MCPToolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sampled_mcp_tool_call_duration_seconds",
		Help:    "Duration of the MCP server's tool calls, by tool and who sampled.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"tool", "sampler"})
}
