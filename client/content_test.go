package client_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/client"
)

func TestContentJSON(t *testing.T) {
	tests := []struct {
		name  string
		block client.Content
		want  string
	}{
		{"empty text", client.TextContent(""), `{"text":"","type":"text"}`},
		{"image", client.Content{Type: client.BlockImage, Data: "iVBORw0K", MIMEType: "image/png"}, `{"data":"iVBORw0K","mimeType":"image/png","type":"image"}`},
		{"tool use without input", client.Content{Type: client.BlockToolUse, ID: "call_1", Name: "now"}, `{"id":"call_1","input":{},"name":"now","type":"tool_use"}`},
		{"tool result without content", client.Content{Type: client.BlockToolResult, ToolUseID: "call_1"}, `{"content":[],"toolUseId":"call_1","type":"tool_result"}`},
		{"tool result", client.Content{Type: client.BlockToolResult, ToolUseID: "call_1", IsError: true,
			Content: []client.Content{client.TextContent("14")}, StructuredContent: json.RawMessage(`{"value":14}`)},
			`{"content":[{"text":"14","type":"text"}],"isError":true,"structuredContent":{"value":14},"toolUseId":"call_1","type":"tool_result"}`},
		{"resource link", client.Content{Type: "resource_link", Name: "README", Extra: map[string]json.RawMessage{"uri": json.RawMessage(`"file:///README.md"`)}},
			`{"name":"README","type":"resource_link","uri":"file:///README.md"}`},
		{"annotations and meta", client.Content{Type: client.BlockText, Text: "hi", Annotations: json.RawMessage(`{"priority":1}`), Meta: json.RawMessage(`{"k":"v"}`)},
			`{"_meta":{"k":"v"},"annotations":{"priority":1},"text":"hi","type":"text"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.block)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("marshal: %s\nwant %s", b, tt.want)
			}
			var back client.Content
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			again, _ := json.Marshal(back)
			if string(again) != tt.want {
				t.Errorf("round trip: %s", again)
			}
		})
	}
}

func TestMessageContentIsOneBlockOrMany(t *testing.T) {
	var got []client.Message
	in := `[{"role":"user","content":{"type":"text","text":"one"}},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`
	if err := json.Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := []client.Message{
		client.UserMessage(client.TextContent("one")),
		client.AssistantMessage(client.TextContent("a"), client.TextContent("b")),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(client.Message{Role: client.RoleUser})
	if string(b) != `{"role":"user","content":[]}` {
		t.Errorf("an empty message: %s", b)
	}
}
