package handlers

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sampled/sampled/internal/sampler"
)

// TestResultBodyJSON: the body written by hand is byte for byte the one
// encoding/json writes from the struct's tags, in every mode.
func TestResultBodyJSON(t *testing.T) {
	isErr := true
	bodies := map[string]*resultBody{
		"plain": {Model: "gpt-4o-mini", Provider: "openai", Role: sampler.RoleAssistant,
			Content: []sampler.Content{sampler.TextBlock("Paris.")}, Text: "Paris.", StopReason: "endTurn",
			Usage: sampler.Usage{InputTokens: 14, OutputTokens: 2}, Attempts: 1, DurationMs: 412},
		"escapes and no stop reason": {Model: "m<1>", Provider: "p&q", Role: sampler.RoleAssistant,
			Content: []sampler.Content{sampler.TextBlock("say \"hi\"\n\tété \xff")}, Text: "say \"hi\"\n\tété \xff"},
		"nil content":   {Model: "m", Provider: "p", Role: sampler.RoleAssistant},
		"empty content": {Model: "m", Provider: "p", Role: sampler.RoleAssistant, Content: []sampler.Content{}},
		"schema": {Model: "m", Provider: "p", Role: sampler.RoleAssistant, Content: []sampler.Content{sampler.TextBlock(`{"a":1}`)},
			Text: `{"a":1}`, Parsed: json.RawMessage(`{"a":1}`), Attempts: 2},
		"schema failed": {Model: "m", Provider: "p", Role: sampler.RoleAssistant, Parsed: json.RawMessage("null"),
			ParseError: &sampler.ParseError{Message: "the answer is not valid JSON", RawText: "x",
				Errors: []sampler.FieldError{{Path: "/", Message: "expected one JSON value"}}}},
		"tools": {Model: "m", Provider: "p", Role: sampler.RoleAssistant,
			Content: []sampler.Content{{Type: sampler.BlockToolUse, ID: "t1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
				{Type: sampler.BlockToolResult, ToolUseID: "t0", IsError: &isErr}},
			ToolCalls: []sampler.ToolCall{{ID: "t1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
		"no tool calls": {Model: "m", Provider: "p", Role: sampler.RoleAssistant, ToolCalls: []sampler.ToolCall{}},
		"raw members with spaces and markup": {Model: "m", Provider: "p", Role: sampler.RoleAssistant,
			Content: []sampler.Content{{Type: sampler.BlockToolUse, ID: "t", Name: "n", Input: json.RawMessage("{ \"city\" :\n \"New York & <co>\" }")},
				{Type: sampler.BlockText, Text: "x", Annotations: json.RawMessage(`{"audience": ["user"], "note": "\u2028"}`)}},
			Parsed: json.RawMessage("{\"a\": \"<b>\",\n \"c\": [1, 2]}")},
	}
	type reflected resultBody // the same members and tags, without its methods
	for name, b := range bodies {
		var want, got bytes.Buffer
		if err := json.NewEncoder(&want).Encode((*reflected)(b)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := encodeBody(&got, b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: the body\n%s\nwant (encoding/json)\n%s", name, got.String(), want.String())
		}
		if m, err := json.Marshal(b); err != nil || string(m)+"\n" != want.String() {
			t.Errorf("%s: MarshalJSON gives %s (%v), want %s", name, m, err, want.String())
		}
	}
}
