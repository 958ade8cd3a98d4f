package chat

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/testing/openaispec"
)

func ptr[T any](v T) *T { return &v }

// TestWrittenBodiesMatchTheSpec: what the types write holds to OpenAI's
// schemas, null members included.
func TestWrittenBodiesMatchTheSpec(t *testing.T) {
	bodies := []struct {
		schema string
		v      any
	}{
		{"CreateChatCompletionRequest", Request{Model: "m", Messages: []Message{
			{Role: RoleSystem, Content: Text("be brief")},
			{Role: RoleUser, Content: Content{Parts: []Part{{Type: PartText, Text: ptr("see")},
				{Type: PartImageURL, ImageURL: &ImageURL{URL: "data:image/png;base64,AAAA"}},
				{Type: PartInputAudio, InputAudio: &InputAudio{Data: "AAAA", Format: "wav"}}}}},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: TypeFunction, Function: FunctionCall{Name: "f", Arguments: "{}"}}}},
			{Role: RoleTool, ToolCallID: "c1", Content: Text("ok")},
		}, MaxCompletionTokens: ptr(5), Stop: Stop{"x"}, Tools: []Tool{{Type: TypeFunction, Function: FunctionDef{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}},
			ToolChoice: &ToolChoice{Mode: TypeFunction, Function: "f"}, ParallelToolCalls: ptr(false),
			ResponseFormat: &ResponseFormat{Type: FormatJSONSchema, JSONSchema: &JSONSchema{Name: "r", Schema: json.RawMessage(`{"type":"object"}`), Strict: ptr(true)}},
			Stream:         true, StreamOptions: &StreamOptions{IncludeUsage: true}}},
		{"CreateChatCompletionResponse", Response{ID: "chatcmpl-1", Object: ObjectCompletion, Created: 1, Model: "m",
			Choices: []Choice{{Message: ResponseMessage{Role: RoleAssistant, Content: Text("hi")}, FinishReason: FinishStop}},
			Usage:   &Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}}},
		{"CreateChatCompletionResponse", Response{ID: "chatcmpl-2", Object: ObjectCompletion, Created: 1, Model: "m",
			Choices: []Choice{{Message: ResponseMessage{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: TypeFunction, Function: FunctionCall{Name: "f", Arguments: `{"a":1}`}}}}, FinishReason: FinishToolCalls}}}},
		{"CreateChatCompletionStreamResponse", Chunk{ID: "chatcmpl-1", Object: ObjectChunk, Created: 1, Model: "m",
			Choices: []ChunkChoice{{Delta: ChunkDelta{Role: RoleAssistant, Content: ptr("")}}}}},
		{"CreateChatCompletionStreamResponse", Chunk{ID: "chatcmpl-1", Object: ObjectChunk, Created: 1, Model: "m",
			Choices: []ChunkChoice{{Delta: ChunkDelta{ToolCalls: []ToolCallChunk{{Index: 0, ID: "c1", Type: TypeFunction, Function: FunctionChunk{Name: "f", Arguments: `{"a"`}}}}}}}},
		{"CreateChatCompletionStreamResponse", Chunk{ID: "chatcmpl-1", Object: ObjectChunk, Created: 1, Model: "m",
			Choices: []ChunkChoice{{Delta: ChunkDelta{}, FinishReason: ptr(FinishStop)}}}},
		{"CreateChatCompletionStreamResponse", Chunk{ID: "chatcmpl-1", Object: ObjectChunk, Created: 1, Model: "m",
			Choices: []ChunkChoice{}, Usage: &Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}}},
		{"ErrorResponse", ErrorResponse{Error: Error{Message: "bad", Type: "invalid_request_error", Param: ptr("messages")}}},
		{"ListModelsResponse", ModelList{Object: ObjectList, Data: []Model{{ID: "offline/default", Object: ObjectModel, Created: 0, OwnedBy: "offline"}}}},
	}
	for _, b := range bodies {
		out, err := json.Marshal(b.v)
		if err != nil {
			t.Fatal(err)
		}
		openaispec.Check(t, b.schema, out)
	}
}

// TestUnions: the members that take one of several shapes read each.
func TestUnions(t *testing.T) {
	var r Request
	body := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null}],
		"stop":"END","tool_choice":{"type":"function","function":{"name":"f"}}}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	got := []string{r.Messages[0].Content.String(), r.Messages[1].Content.String(), r.Stop[0], r.ToolChoice.Mode + ":" + r.ToolChoice.Function}
	if diff := cmp.Diff([]string{"hi", "ab", "END", "function:f"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if r.Messages[2].Content.Text != nil || r.Messages[2].Content.Parts != nil {
		t.Errorf("null content read as %+v", r.Messages[2].Content)
	}
	if err := json.Unmarshal([]byte(`{"role":"user","content":3}`), new(Message)); err == nil {
		t.Error("numeric content accepted")
	}
	var tc ToolChoice
	if err := json.Unmarshal([]byte(`"required"`), &tc); err != nil || tc.Mode != ChoiceRequired {
		t.Errorf("tool_choice %q: %+v %v", "required", tc, err)
	}
	if b, _ := json.Marshal(ToolChoice{Mode: ChoiceAuto}); string(b) != `"auto"` {
		t.Errorf("auto written as %s", b)
	}
}
