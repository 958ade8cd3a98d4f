package sampler

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/testing/mcpschema"
)

const mcpRef = "../../reference/mcp"

// TestMCPExamplesRoundTrip decodes every official example into sampled's
// type for its definition, encodes it again and requires the same JSON.
func TestMCPExamplesRoundTrip(t *testing.T) {
	// A sampling/createMessage request as it arrives (the example lacks
	// jsonrpc and id; see reference/README.md).
	type createMessageRequest struct {
		Method string              `json:"method"`
		Params CreateMessageParams `json:"params"`
	}
	types := map[string]func() any{
		"CreateMessageRequest":       func() any { return new(createMessageRequest) },
		"CreateMessageRequestParams": func() any { return new(CreateMessageParams) },
		"CreateMessageResult":        func() any { return new(CreateMessageResult) },
		"SamplingMessage":            func() any { return new(Message) },
		"ToolResultContent":          func() any { return new(Content) },
		"ToolUseContent":             func() any { return new(Content) },
	}
	// Capabilities are declared by go-sdk's client session, not by a type of
	// sampled's.
	unmodelled := map[string]bool{"ClientCapabilities": true}
	files, err := filepath.Glob(filepath.Join(mcpRef, "examples", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	v, err := mcpschema.Load(filepath.Join(mcpRef, "schema-2025-11-25.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		def := filepath.Base(filepath.Dir(f))
		if unmodelled[def] {
			continue
		}
		t.Run(def+"/"+filepath.Base(f), func(t *testing.T) {
			mk, ok := types[def]
			if !ok {
				t.Fatalf("no type for definition %s", def)
			}
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			val := mk()
			if err := json.Unmarshal(in, val); err != nil {
				t.Fatalf("decode: %v", err)
			}
			out, err := json.Marshal(val)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			var want, got any
			if err := json.Unmarshal(in, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round trip lost something (-want +got):\n%s", diff)
			}
			// The request example lacks jsonrpc/id: its params validate.
			if def == "CreateMessageRequest" {
				p, _ := json.Marshal(val.(*createMessageRequest).Params)
				def, out = "CreateMessageRequestParams", p
			}
			if err := v.Validate(def, out); err != nil {
				t.Errorf("re-encoded example does not validate: %v", err)
			}
		})
	}
}

func TestContentKeepsUnmodelledMembers(t *testing.T) {
	in := `{"type":"tool_result","toolUseId":"c1","content":[{"type":"resource_link","uri":"file:///a.txt","name":"a","_meta":{"k":1}},{"type":"resource","resource":{"uri":"file:///b","text":"b"}}],"structuredContent":{"n":1},"isError":false,"_meta":{"x":"y"}}`
	var c Content
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(in), &want)
	_ = json.Unmarshal(out, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMessageContentShapes(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
		blocks            int
	}{
		{name: "single block", in: `{"role":"user","content":{"type":"text","text":"hi"}}`, blocks: 1},
		{name: "array", in: `{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, blocks: 2},
		{name: "missing content", in: `{"role":"user"}`, wantErr: "/content: content is required"},
		{name: "block without type", in: `{"role":"user","content":[{"text":"a"}]}`, wantErr: "/content/0: content block needs a type"},
		{name: "block not an object", in: `{"role":"user","content":[1]}`, wantErr: "/content/0: content block must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Message
			err := json.Unmarshal([]byte(tt.in), &m)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err == nil && len(m.Content) != tt.blocks {
				t.Errorf("got %d blocks, want %d", len(m.Content), tt.blocks)
			}
		})
	}
}

func TestToolChoiceSpellings(t *testing.T) {
	tests := []struct{ in, mode, name string }{
		{`"auto"`, "auto", ""},
		{`"required"`, "required", ""},
		{`{"mode":"none"}`, "none", ""},
		{`{"mode":"tool","name":"get_weather"}`, "tool", "get_weather"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var tc ToolChoice
			if err := json.Unmarshal([]byte(tt.in), &tc); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ToolChoice{Mode: tt.mode, Name: tt.name}, tc); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			out, _ := json.Marshal(tc)
			if out[0] != '{' {
				t.Errorf("emitted %s, want the object spelling", out)
			}
		})
	}
}
