package sampler

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// seedExamples adds the official MCP examples of the given definitions to
// the corpus, whole and, for requests, their params.
func seedExamples(f *testing.F, defs ...string) {
	f.Helper()
	for _, def := range defs {
		files, err := filepath.Glob(filepath.Join(mcpRef, "examples", def, "*.json"))
		if err != nil || len(files) == 0 {
			f.Fatalf("no examples of %s: %v", def, err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// maxGrowth bounds what decoding and encoding again may make of an input:
// escaping writes a byte as at most six ("\u003c"), and a few members are
// added (role, type, empty content).
func maxGrowth(n int) int { return 6*n + 256 }

// roundTrip encodes v, which decoding accepted, and decodes the encoding
// into fresh: what sampled accepts it must be able to send on.
func roundTrip[T any](t *testing.T, in []byte, v *T) {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("accepted %q, cannot encode it: %v", in, err)
	}
	if len(out) > maxGrowth(len(in)) {
		t.Fatalf("%d bytes encode as %d", len(in), len(out))
	}
	var again T
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatalf("accepted %q, refuses its encoding %s: %v", in, out, err)
	}
}

// FuzzMessage decodes MCP sampling messages (SamplingMessage) as
// /v1/sample, /v1/loops and MCP clients send them.
func FuzzMessage(f *testing.F) {
	seedExamples(f, "SamplingMessage")
	f.Add([]byte(`{"role":"user","content":{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}}`))
	f.Add([]byte(`{"role":"user","content":[{"type":"tool_result","toolUseId":"c1","content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1},"isError":false}]}`))
	f.Add([]byte(`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}}],"_meta":{"k":"v"}}`))
	f.Add([]byte(`{"role":"user","content":[]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var m Message
		if json.Unmarshal(in, &m) != nil {
			return
		}
		roundTrip(t, in, &m)
	})
}

// FuzzContent decodes single content blocks: text, image, audio,
// tool_use, tool_result and unknown types.
func FuzzContent(f *testing.F) {
	seedExamples(f, "ToolUseContent", "ToolResultContent")
	f.Add([]byte(`{"type":"text","text":"hi","annotations":{"audience":["user"]}}`))
	f.Add([]byte(`{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}`))
	f.Add([]byte(`{"type":"resource_link","uri":"file:///a","name":"a"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var c Content
		if json.Unmarshal(in, &c) != nil {
			return
		}
		roundTrip(t, in, &c)
		_ = c.StructuredText()
	})
}

// FuzzCreateMessageParams decodes sampling/createMessage params as the MCP
// route and MCP clients send them, and converts them for the service.
func FuzzCreateMessageParams(f *testing.F) {
	seedExamples(f, "CreateMessageRequestParams")
	f.Add([]byte(`{"messages":[],"maxTokens":1,"toolChoice":{"mode":"required"},"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":{"type":"text","text":"a"}}],"maxTokens":-1,"temperature":3,"includeContext":"allServers","task":{"ttl":1},"_meta":{}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var p CreateMessageParams
		if json.Unmarshal(in, &p) != nil {
			return
		}
		params, err := p.Params()
		if err != nil {
			return
		}
		if params == nil {
			t.Fatal("Params returned neither params nor an error")
		}
		// Accepted params are sent on (to an MCP client, say) as encoded.
		roundTrip(t, in, &p)
	})
}
