package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// checkRequestJSON fails unless appendJSON writes what json.Marshal writes
// for r, or fails where it fails.
func checkRequestJSON(t *testing.T, r *chatRequest) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, err := r.appendJSON([]byte("prefix"))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("appendJSON error %v, json.Marshal error %v", err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("appendJSON wrote\n%s\njson.Marshal writes\n%s", got, want)
	}
}

func TestChatRequestJSON(t *testing.T) {
	text := "a <b> & \"c\"\n\u2028 é \xff"
	temp := func(f float64) *float64 { return &f }
	yes, no := true, false
	named := namedToolChoice{Type: typeFunction}
	named.Function.Name = "get_weather"
	cases := map[string]*chatRequest{
		"zero":           {},
		"no messages":    {Model: "m", Messages: []chatMessage{}},
		"plain":          {Model: "gpt-4o-mini", Messages: []chatMessage{{Role: roleUser, Content: "hi"}}, MaxCompletionTokens: 100},
		"escapes":        {Model: text, Messages: []chatMessage{{Role: roleSystem, Content: text}, {Role: roleUser, Content: text}}},
		"null content":   {Messages: []chatMessage{{Role: roleAssistant, Content: nil}}},
		"nil parts":      {Messages: []chatMessage{{Role: roleUser, Content: []contentPart(nil)}}},
		"empty parts":    {Messages: []chatMessage{{Role: roleUser, Content: []contentPart{}}}},
		"other content":  {Messages: []chatMessage{{Role: roleUser, Content: map[string]int{"b": 2, "a": 1}}}},
		"bad content":    {Messages: []chatMessage{{Role: roleUser, Content: math.NaN()}}},
		"temperature 0":  {Temperature: temp(0)},
		"temperature .7": {Temperature: temp(0.7)},
		"temperature -0": {Temperature: temp(math.Copysign(0, -1))},
		"tiny":           {Temperature: temp(1e-7)},
		"tiny negative":  {Temperature: temp(-2.5e-9)},
		"small exponent": {Temperature: temp(1e-300)},
		"huge":           {Temperature: temp(1e21)},
		"large":          {Temperature: temp(123456789012345678)},
		"NaN":            {Temperature: temp(math.NaN())},
		"infinite":       {Temperature: temp(math.Inf(-1))},
		"stop":           {Stop: []string{"END", text}},
		"empty stop":     {Stop: []string{}},
		"parts": {Messages: []chatMessage{{Role: roleUser, Content: []contentPart{
			{Type: partText, Text: &text},
			{Type: partImageURL, ImageURL: &imageURL{URL: "data:image/png;base64,iVBO=="}},
			{Type: partInputAudio, InputAudio: &inputAudio{Data: "UklG", Format: "wav"}},
			{Type: partText},
		}}}},
		"tool calls": {Messages: []chatMessage{
			{Role: roleAssistant, ToolCalls: []toolCall{{ID: "call_1", Type: typeFunction, Function: functionCall{Name: "f", Arguments: `{"a":"<b>"}`}}, {}}},
			{Role: roleTool, Content: "72F", ToolCallID: "call_1"},
		}},
		"tools": {Tools: []chatTool{
			{Type: typeFunction, Function: functionDef{Name: "f", Description: text, Parameters: json.RawMessage(`{ "type": "object",
				"properties": {"q": {"type": "string", "pattern": "<&>\u2028"}} }`)}},
			{Type: typeFunction, Function: functionDef{Name: "g"}},
		}},
		"bad parameters":  {Tools: []chatTool{{Type: typeFunction, Function: functionDef{Name: "f", Parameters: json.RawMessage(`{"a":`)}}}},
		"choice string":   {ToolChoice: "required"},
		"choice empty":    {ToolChoice: ""},
		"choice named":    {ToolChoice: named},
		"choice other":    {ToolChoice: map[string]string{"type": "allowed_tools"}},
		"parallel false":  {ParallelToolCalls: &no},
		"parallel true":   {ParallelToolCalls: &yes},
		"response format": {ResponseFormat: &responseFormat{Type: typeJSONSchema, JSONSchema: jsonSchema{Name: schemaName, Schema: json.RawMessage(`{"type": "object"}`), Strict: true}}},
		"no schema":       {ResponseFormat: &responseFormat{Type: typeJSONSchema}},
		"everything": {Model: "gpt-4.1", Messages: []chatMessage{{Role: roleUser, Content: "q"}}, MaxCompletionTokens: 5,
			Temperature: temp(1), Stop: []string{"x"}, Tools: []chatTool{{Type: typeFunction, Function: functionDef{Name: "f"}}},
			ToolChoice: named, ParallelToolCalls: &no,
			ResponseFormat: &responseFormat{Type: typeJSONSchema, JSONSchema: jsonSchema{Name: schemaName, Schema: json.RawMessage(`true`)}}},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) { checkRequestJSON(t, r) })
	}
}

// FuzzChatRequestJSON puts fuzzed strings, numbers and raw JSON in every
// member of a request and compares appendJSON with json.Marshal.
func FuzzChatRequestJSON(f *testing.F) {
	f.Add("hello", "<script>&\u2028", 0.7, []byte(`{"type":"object"}`), 3)
	f.Add("", "\xff\xfe", 1e-7, []byte(` [1, 2] `), 0)
	f.Add("é", "\x00", math.Inf(1), []byte(`{"a":`), -1)
	f.Fuzz(func(t *testing.T, s1, s2 string, temp float64, raw []byte, n int) {
		no := n%2 == 0
		var choice any = s1
		if n%3 == 0 {
			nc := namedToolChoice{Type: s2}
			nc.Function.Name = s1
			choice = nc
		}
		var content any = s2
		if n%5 == 0 {
			content = []contentPart{{Type: s1, Text: &s2}, {Type: partImageURL, ImageURL: &imageURL{URL: s1}}}
		}
		r := &chatRequest{Model: s1, MaxCompletionTokens: n, Temperature: &temp, Stop: []string{s1, s2},
			Messages: []chatMessage{{Role: s1, Content: content, ToolCallID: s2},
				{Role: roleAssistant, ToolCalls: []toolCall{{ID: s2, Type: s1, Function: functionCall{Name: s1, Arguments: s2}}}}},
			Tools:      []chatTool{{Type: typeFunction, Function: functionDef{Name: s1, Description: s2, Parameters: raw}}},
			ToolChoice: choice, ParallelToolCalls: &no,
			ResponseFormat: &responseFormat{Type: s2, JSONSchema: jsonSchema{Name: s1, Schema: raw, Strict: no}}}
		checkRequestJSON(t, r)
	})
}
