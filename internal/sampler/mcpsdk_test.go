package sampler

//lint:file-ignore SA1019 the bridge maps go-sdk's sampling types, deprecated from 2026-07-28.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sameJSON compares raw JSON by value, and ignores how a message's content
// was spelled (one block or an array).
var sameJSON = cmp.Options{
	cmp.Transformer("json", func(r json.RawMessage) any {
		var v any
		if len(r) == 0 {
			return nil
		}
		if err := json.Unmarshal(r, &v); err != nil {
			return string(r)
		}
		return v
	}),
	cmpopts.IgnoreUnexported(Message{}),
}

// TestBridgeExamples: every official sampling example, decoded by go-sdk's
// type, converts to the domain value that sampled's own decoding of the
// example gives, and back to the same go-sdk value.
func TestBridgeExamples(t *testing.T) {
	type example struct {
		// sdk decodes the example with go-sdk's type; domain with sampled's.
		sdk, domain func(t *testing.T, b []byte) any
		// convert maps go-sdk's value to the domain's and back.
		convert func(t *testing.T, v any) (domain, back any)
	}
	params := example{
		sdk: func(t *testing.T, b []byte) any { return decode[mcp.CreateMessageWithToolsParams](t, b) },
		domain: func(t *testing.T, b []byte) any {
			return decode[CreateMessageParams](t, b)
		},
		convert: func(t *testing.T, v any) (any, any) {
			d, err := FromMCPParams(v.(*mcp.CreateMessageWithToolsParams))
			if err != nil {
				t.Fatal(err)
			}
			back, err := ToMCPParams(d)
			if err != nil {
				t.Fatal(err)
			}
			return d, back
		},
	}
	// A content block is decoded by go-sdk inside a message.
	block := example{
		sdk: func(t *testing.T, b []byte) any {
			m := decode[mcp.SamplingMessageV2](t, []byte(`{"role":"user","content":`+string(b)+`}`))
			return &m.Content[0]
		},
		domain: func(t *testing.T, b []byte) any { return decode[Content](t, b) },
		convert: func(t *testing.T, v any) (any, any) {
			d, err := FromMCPContents([]mcp.Content{*v.(*mcp.Content)})
			if err != nil {
				t.Fatal(err)
			}
			back, err := ToMCPContents(d)
			if err != nil {
				t.Fatal(err)
			}
			return &d[0], &back[0]
		},
	}
	examples := map[string]example{
		"CreateMessageRequest": {
			sdk: func(t *testing.T, b []byte) any {
				return &decode[struct {
					Params mcp.CreateMessageWithToolsParams
				}](t, b).Params
			},
			domain: func(t *testing.T, b []byte) any {
				return &decode[struct{ Params CreateMessageParams }](t, b).Params
			},
			convert: params.convert,
		},
		"CreateMessageRequestParams": params,
		"CreateMessageResult": {
			sdk:    func(t *testing.T, b []byte) any { return decode[mcp.CreateMessageWithToolsResult](t, b) },
			domain: func(t *testing.T, b []byte) any { return decode[CreateMessageResult](t, b) },
			convert: func(t *testing.T, v any) (any, any) {
				d, err := FromMCPResult(v.(*mcp.CreateMessageWithToolsResult))
				if err != nil {
					t.Fatal(err)
				}
				back, err := ToMCPResult(d)
				if err != nil {
					t.Fatal(err)
				}
				return d, back
			},
		},
		"SamplingMessage": {
			sdk:    func(t *testing.T, b []byte) any { return decode[mcp.SamplingMessageV2](t, b) },
			domain: func(t *testing.T, b []byte) any { return decode[Message](t, b) },
			convert: func(t *testing.T, v any) (any, any) {
				m := v.(*mcp.SamplingMessageV2)
				content, err := FromMCPContents(m.Content)
				if err != nil {
					t.Fatal(err)
				}
				back, err := ToMCPContents(content)
				if err != nil {
					t.Fatal(err)
				}
				return &Message{Role: Role(m.Role), Content: content}, &mcp.SamplingMessageV2{Role: m.Role, Content: back}
			},
		},
		"ToolResultContent": block,
		"ToolUseContent":    block,
	}
	files, err := filepath.Glob(filepath.Join(mcpRef, "examples", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	seen := 0
	for _, f := range files {
		ex, ok := examples[filepath.Base(filepath.Dir(f))]
		if !ok {
			continue // ClientCapabilities: declared by go-sdk's session
		}
		seen++
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sdk := ex.sdk(t, b)
			domain, back := ex.convert(t, sdk)
			if diff := cmp.Diff(ex.domain(t, b), domain, sameJSON); diff != "" {
				t.Errorf("domain value (-decoded +converted):\n%s", diff)
			}
			if diff := cmp.Diff(sdk, back); diff != "" {
				t.Errorf("back to go-sdk (-want +got):\n%s", diff)
			}
		})
	}
	if seen < 11 {
		t.Errorf("%d sampling examples, want the 11 of reference/mcp", seen)
	}
}

// TestBridgeBlocks: the blocks the examples lack go to the domain and back
// unchanged.
func TestBridgeBlocks(t *testing.T) {
	size := int64(42)
	meta := mcp.Meta{"k": "v"}
	ann := &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}
	blocks := []mcp.Content{
		&mcp.TextContent{Text: "hi", Meta: meta, Annotations: ann},
		&mcp.ImageContent{Data: []byte{0, 1, 2}, MIMEType: "image/png", Annotations: ann},
		&mcp.AudioContent{Data: []byte("wav"), MIMEType: "audio/wav", Meta: meta},
		&mcp.ToolUseContent{ID: "c1", Name: "get_weather", Input: map[string]any{"city": "Paris", "days": 2.0}, Meta: meta},
		&mcp.ToolResultContent{ToolUseID: "c1", IsError: true, StructuredContent: map[string]any{"temp": 21.0},
			Content: []mcp.Content{&mcp.TextContent{Text: "sunny"}, &mcp.ResourceLink{URI: "file:///a", Name: "a"}}},
		&mcp.ResourceLink{URI: "file:///w.txt", Name: "w", Title: "W", Description: "weather", MIMEType: "text/plain",
			Size: &size, Icons: []mcp.Icon{{Source: "https://x/i.png"}}, Meta: meta, Annotations: ann},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b", MIMEType: "text/plain", Text: "b"}, Meta: meta},
	}
	domain, err := FromMCPContents(blocks)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ToMCPContents(domain)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(blocks, back); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The domain holds them as its own JSON decoding would.
	for i, c := range domain {
		b, err := json.Marshal(blocks[i])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(*decode[Content](t, b), c, sameJSON); diff != "" {
			t.Errorf("block %d (-decoded +converted):\n%s", i, diff)
		}
	}
	if _, err := ToMCPContents([]Content{{Type: BlockImage, Data: "not base64!", MIMEType: "image/png"}}); err == nil {
		t.Error("an image whose data is not base64 converted")
	}
	if _, err := ToMCPContents([]Content{{Type: "video"}}); err == nil {
		t.Error("a block of an unknown type converted")
	}
}

// decode decodes b into a new T.
func decode[T any](t *testing.T, b []byte) *T {
	t.Helper()
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	return v
}
