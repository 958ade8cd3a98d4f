package handlers

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkSample measures one request through the full HTTP stack (client,
// loopback TCP, router, decoding, checks, offline provider, encoding) per
// sampling mode and helper.
func BenchmarkSample(b *testing.B) {
	tool := `{"name":"get_weather","description":"Get current weather for a city","inputSchema":{"type":"object","properties":{"city":{"type":"string","examples":["Paris"]}},"required":["city"]}}`
	schema := `{"type":"object","properties":{"city":{"type":"string"},"population":{"type":"integer","minimum":0},"tags":{"type":"array","items":{"type":"string"}}},"required":["city","population"]}`
	cases := []struct{ name, path, body string }{
		{"plain", "/v1/sample", `{"prompt":"Name three rivers in France"}`},
		{"schema", "/v1/sample", `{"prompt":"Describe Paris","schema":` + schema + `}`},
		{"tools", "/v1/sample", `{"prompt":"What is the weather in Paris?","tools":[` + tool + `]}`},
		{"helper_schema_flaky", "/v1/sample/schema", `{"prompt":"Describe Paris","model":"offline/flaky","schema":` + schema + `}`},
		{"helper_tools_flaky", "/v1/sample/tools", `{"prompt":"Weather in Paris?","model":"offline/flaky","tools":[` + tool + `]}`},
		{"messages", "/v1/messages", `{"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],"maxTokens":100}`},
	}
	s := startStack(b, 0)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(s.url+c.path, "application/json", strings.NewReader(c.body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
