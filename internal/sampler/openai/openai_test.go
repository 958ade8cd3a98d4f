package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

const testKey = "sk-test-0123456789abcdef"

func ptr[T any](v T) *T { return &v }

func userText(s string) sampler.Message {
	return sampler.Message{Role: sampler.RoleUser, Content: []sampler.Content{sampler.TextBlock(s)}}
}

// weatherTool returns the function of OpenAI's function-calling examples.
func weatherTool() sampler.Tool {
	return sampler.Tool{
		Name:        "get_current_weather",
		Description: "Get the current weather in a given location",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"],"additionalProperties":false}`),
	}
}

// eventSchema satisfies OpenAI's strict rules.
const eventSchema = `{"type":"object","properties":{"name":{"type":"string"},"date":{"type":"string"},"participants":{"type":"array","items":{"type":"string"}}},"required":["name","date","participants"],"additionalProperties":false}`

func TestSample(t *testing.T) {
	yes := true
	tests := []struct {
		name  string
		req   *sampler.Request
		reply string
		want  *sampler.Response
	}{
		{
			name: "text",
			req: &sampler.Request{
				Model:         "gpt-4.1",
				SystemPrompt:  "You are a helpful assistant.",
				Messages:      []sampler.Message{userText("Hello!")},
				MaxTokens:     256,
				Temperature:   ptr(0.0),
				StopSequences: []string{"\n\n", "END"},
				Metadata:      json.RawMessage(`{"requestId":"r-1"}`),
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "gpt-4.1-2025-04-14",
				Content:    []sampler.Content{sampler.TextBlock("Hello! How can I assist you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 19, OutputTokens: 10},
			},
		},
		{
			name: "json_schema",
			req: &sampler.Request{
				Model:        "gpt-4o-2024-08-06",
				SystemPrompt: "Extract the event information.",
				Messages:     []sampler.Message{userText("Alice and Bob are going to a science fair on Friday.")},
				MaxTokens:    512,
				Schema:       json.RawMessage(eventSchema),
			},
			reply: "schema.json",
			want: &sampler.Response{
				Model:      "gpt-4o-2024-08-06",
				Content:    []sampler.Content{sampler.TextBlock(`{"name":"Science Fair","date":"Friday","participants":["Alice","Bob"]}`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 92, OutputTokens: 18},
			},
		},
		{
			name: "json_schema_not_strict",
			req: &sampler.Request{
				Model:     "gpt-4o-2024-08-06",
				Messages:  []sampler.Message{userText("Alice and Bob are going to a science fair on Friday.")},
				MaxTokens: 512,
				// participants is optional and extra properties are allowed:
				// strict mode would change the meaning.
				Schema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"name":{"type":"string","minLength":1},"date":{"type":"string","format":"date"},"participants":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["name","date"]}`),
			},
			reply: "schema.json",
			want: &sampler.Response{
				Model:      "gpt-4o-2024-08-06",
				Content:    []sampler.Content{sampler.TextBlock(`{"name":"Science Fair","date":"Friday","participants":["Alice","Bob"]}`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 92, OutputTokens: 18},
			},
		},
		{
			name: "tool_call",
			req: &sampler.Request{
				Model:      "gpt-4o-mini",
				Messages:   []sampler.Message{userText("What's the weather like in Boston today?")},
				MaxTokens:  1024,
				Tools:      []sampler.Tool{weatherTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired},
			},
			reply: "tool_call.json",
			want: &sampler.Response{
				Model: "gpt-4o-mini",
				Content: []sampler.Content{{Type: sampler.BlockToolUse, ID: "call_abc123", Name: "get_current_weather",
					Input: json.RawMessage(`{"location":"Boston, MA"}`)}},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 82, OutputTokens: 17},
			},
		},
		{
			name: "tool_choice_named",
			req: &sampler.Request{
				Model:      "gpt-4o-mini",
				Messages:   []sampler.Message{userText("What's the weather like in Boston today?")},
				MaxTokens:  1024,
				Tools:      []sampler.Tool{weatherTool(), {Name: "get_time", InputSchema: json.RawMessage(`{"type":"object"}`)}},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "get_current_weather"},
			},
			reply: "tool_call.json",
			want: &sampler.Response{
				Model: "gpt-4o-mini",
				Content: []sampler.Content{{Type: sampler.BlockToolUse, ID: "call_abc123", Name: "get_current_weather",
					Input: json.RawMessage(`{"location":"Boston, MA"}`)}},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 82, OutputTokens: 17},
			},
		},
		{
			name: "parallel_disabled",
			req: &sampler.Request{
				Model:      "gpt-4o-mini",
				Messages:   []sampler.Message{userText("What's the weather like in Boston today?")},
				MaxTokens:  1024,
				Tools:      []sampler.Tool{weatherTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired, DisableParallelToolUse: true},
			},
			reply: "tool_call.json",
			want: &sampler.Response{
				Model: "gpt-4o-mini",
				Content: []sampler.Content{{Type: sampler.BlockToolUse, ID: "call_abc123", Name: "get_current_weather",
					Input: json.RawMessage(`{"location":"Boston, MA"}`)}},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 82, OutputTokens: 17},
			},
		},
		{
			name: "tool_choice_none",
			req: &sampler.Request{
				Model:      "gpt-4o-mini",
				Messages:   []sampler.Message{userText("Say hello.")},
				MaxTokens:  1024,
				Tools:      []sampler.Tool{weatherTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceNone},
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "gpt-4.1-2025-04-14",
				Content:    []sampler.Content{sampler.TextBlock("Hello! How can I assist you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 19, OutputTokens: 10},
			},
		},
		{
			name: "parallel_tool_calls",
			req: &sampler.Request{
				Model:     "gpt-4o-2024-08-06",
				Messages:  []sampler.Message{userText("What's the weather like in San Francisco, Tokyo, and Paris?")},
				MaxTokens: 1024,
				Tools:     []sampler.Tool{weatherTool()},
				// No tool choice: nothing is sent and the model decides.
			},
			reply: "parallel_tool_calls.json",
			want: &sampler.Response{
				Model: "gpt-4o-2024-08-06",
				Content: []sampler.Content{
					sampler.TextBlock("Let me check these cities."),
					{Type: sampler.BlockToolUse, ID: "call_8qty38", Name: "get_current_weather",
						Input: json.RawMessage(`{"location":"San Francisco, CA","unit":"celsius"}`)},
					{Type: sampler.BlockToolUse, ID: "call_9r2k5z", Name: "get_current_weather",
						Input: json.RawMessage(`{"location":"Tokyo, Japan","unit":"celsius"}`)},
					// Arguments that are not a JSON object are kept, as text,
					// under _invalid_arguments.
					{Type: sampler.BlockToolUse, ID: "call_x0bad1", Name: "get_current_weather",
						Input: json.RawMessage(`{"_invalid_arguments":"{\"location\": \"Paris"}`)},
				},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 115, OutputTokens: 70},
			},
		},
		{
			name: "tool_results",
			req: &sampler.Request{
				Model: "gpt-4o-2024-08-06",
				Messages: []sampler.Message{
					userText("What's the weather like in San Francisco and Tokyo?"),
					{Role: sampler.RoleAssistant, Content: []sampler.Content{
						sampler.TextBlock("Let me check both cities."),
						{Type: sampler.BlockToolUse, ID: "call_8qty38", Name: "get_current_weather",
							Input: json.RawMessage(`{"location": "San Francisco, CA", "unit": "celsius"}`)},
						{Type: sampler.BlockToolUse, ID: "call_9r2k5z", Name: "get_current_weather",
							Input: json.RawMessage(`{"location":"Tokyo, Japan","unit":"celsius"}`)},
						{Type: sampler.BlockToolUse, ID: "call_q1w2e3", Name: "get_current_weather",
							Input: json.RawMessage(`{"location":"Atlantis"}`)},
					}},
					{Role: sampler.RoleUser, Content: []sampler.Content{
						{Type: sampler.BlockToolResult, ToolUseID: "call_8qty38",
							Content:           []sampler.Content{sampler.TextBlock("18°C"), sampler.TextBlock("fog")},
							StructuredContent: json.RawMessage(`{"temperature": 18, "sky": "fog"}`)},
						{Type: sampler.BlockToolResult, ToolUseID: "call_9r2k5z",
							Content:           []sampler.Content{},
							StructuredContent: json.RawMessage(`{"temperature": 26, "sky": "clear"}`)},
						{Type: sampler.BlockToolResult, ToolUseID: "call_q1w2e3", IsError: &yes,
							Content: []sampler.Content{sampler.TextBlock("unknown location: Atlantis")}},
					}},
					{Role: sampler.RoleAssistant, Content: []sampler.Content{
						{Type: sampler.BlockToolUse, ID: "call_a1", Name: "get_current_weather",
							Input: json.RawMessage(`{"location":"Oslo"}`)},
					}},
					{Role: sampler.RoleUser, Content: []sampler.Content{
						{Type: sampler.BlockToolResult, ToolUseID: "call_a1",
							Content:           []sampler.Content{sampler.TextBlock(`{"temperature":3}`)},
							StructuredContent: json.RawMessage(`{"temperature": 3}`)},
					}},
				},
				MaxTokens: 1024,
				Tools:     []sampler.Tool{weatherTool()},
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "gpt-4.1-2025-04-14",
				Content:    []sampler.Content{sampler.TextBlock("Hello! How can I assist you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 19, OutputTokens: 10},
			},
		},
		{
			name: "refusal",
			req: &sampler.Request{
				Model:     "gpt-4o-2024-08-06",
				Messages:  []sampler.Message{userText("How do I pick a lock?")},
				MaxTokens: 256,
				Schema:    json.RawMessage(eventSchema),
			},
			reply: "refusal.json",
			want: &sampler.Response{
				Model:      "gpt-4o-2024-08-06",
				Content:    []sampler.Content{sampler.TextBlock("I'm sorry, I can't assist with that request.")},
				StopReason: sampler.StopRefusal,
				Usage:      sampler.Usage{InputTokens: 81, OutputTokens: 11},
			},
		},
		{
			name: "max_tokens",
			req: &sampler.Request{
				Model:     "gpt-4.1-mini",
				Messages:  []sampler.Message{userText("Tell me a story.")},
				MaxTokens: 8,
			},
			reply: "length.json",
			want: &sampler.Response{
				Model:      "gpt-4.1-mini-2025-04-14",
				Content:    []sampler.Content{sampler.TextBlock("Once upon a time, in a land far")},
				StopReason: sampler.StopMaxTokens,
				Usage:      sampler.Usage{InputTokens: 14, OutputTokens: 8},
			},
		},
		{
			name: "image",
			req: &sampler.Request{
				Model: "gpt-4.1",
				Messages: []sampler.Message{{Role: sampler.RoleUser, Content: []sampler.Content{
					sampler.TextBlock("What is in this image?"),
					{Type: sampler.BlockImage, MIMEType: "image/png", Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="},
				}}},
				MaxTokens: 300,
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "gpt-4.1-2025-04-14",
				Content:    []sampler.Content{sampler.TextBlock("Hello! How can I assist you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 19, OutputTokens: 10},
			},
		},
		{
			name: "audio_wav",
			req: &sampler.Request{
				Model: "gpt-4o-audio-preview",
				Messages: []sampler.Message{{Role: sampler.RoleUser, Content: []sampler.Content{
					sampler.TextBlock("What is in this recording?"),
					{Type: sampler.BlockAudio, MIMEType: "audio/wav", Data: "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="},
					{Type: sampler.BlockAudio, MIMEType: "audio/mpeg", Data: "SUQzBAAAAAAAI1RTU0UAAAAPAAADTGF2ZjU4Ljc2LjEwMAAAAAAAAAAAAAAA"},
				}}},
				MaxTokens: 300,
			},
			reply: "text.json",
			want: &sampler.Response{
				Model:      "gpt-4.1-2025-04-14",
				Content:    []sampler.Content{sampler.TextBlock("Hello! How can I assist you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 19, OutputTokens: 10},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{file: "replies/" + tt.reply})
			p := New(Options{BaseURL: f.srv.URL, APIKey: testKey})
			got, err := p.Sample(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sample (-want +got):\n%s", diff)
			}
			reqs := f.received()
			if len(reqs) != 1 {
				t.Fatalf("upstream got %d requests, want 1", len(reqs))
			}
			if got, want := reqs[0].path, "/chat/completions"; got != want {
				t.Errorf("path %q, want %q", got, want)
			}
			if got, want := reqs[0].header.Get("Authorization"), "Bearer "+testKey; got != want {
				t.Errorf("Authorization %q, want %q", got, want)
			}
			checkGolden(t, tt.name, reqs[0].body)
		})
	}
}

// TestSampleInvalid checks that content OpenAI cannot carry is refused
// before any call, with the path of the offending block.
func TestSampleInvalid(t *testing.T) {
	tests := []struct {
		name string
		msgs []sampler.Message
		want *sampler.InvalidError
	}{
		{
			name: "audio_ogg",
			msgs: []sampler.Message{{Role: sampler.RoleUser, Content: []sampler.Content{
				sampler.TextBlock("Transcribe this."),
				{Type: sampler.BlockAudio, MIMEType: "audio/ogg", Data: "T2dnUwACAAAAAAAAAAA="},
			}}},
			want: sampler.Invalid("/messages/0/content/1", "provider openai does not accept audio of type audio/ogg"),
		},
		{
			name: "image_in_assistant_message",
			msgs: []sampler.Message{
				userText("Draw a cat."),
				{Role: sampler.RoleAssistant, Content: []sampler.Content{
					sampler.TextBlock("Here it is:"),
					{Type: sampler.BlockImage, MIMEType: "image/png", Data: "iVBORw0KGgo="},
				}},
				userText("Thanks!"),
			},
			want: sampler.Invalid("/messages/1/content/1", "provider openai does not accept image content in assistant messages"),
		},
		{
			name: "audio_in_assistant_message",
			msgs: []sampler.Message{
				userText("Sing."),
				{Role: sampler.RoleAssistant, Content: []sampler.Content{
					{Type: sampler.BlockAudio, MIMEType: "audio/wav", Data: "UklGRiQAAABXQVZF"},
				}},
				userText("Again!"),
			},
			want: sampler.Invalid("/messages/1/content/0", "provider openai does not accept audio content in assistant messages"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			p := New(Options{BaseURL: f.srv.URL})
			_, err := p.Sample(context.Background(), &sampler.Request{Model: "gpt-4o", Messages: tt.msgs, MaxTokens: 100})
			got, ok := err.(*sampler.InvalidError)
			if !ok {
				t.Fatalf("Sample error = %#v, want *sampler.InvalidError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sample error (-want +got):\n%s", diff)
			}
			if n := len(f.received()); n != 0 {
				t.Errorf("upstream got %d requests, want none", n)
			}
		})
	}
}

func TestStrictCompatible(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   bool
	}{
		{"flat strict object", eventSchema, true},
		{"nested objects, $defs and anyOf", `{"type":"object","properties":{
			"user":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false},
			"tags":{"type":"array","items":{"$ref":"#/$defs/tag"}},
			"contact":{"anyOf":[{"type":"string"},{"type":"object","properties":{"email":{"type":"string"}},"required":["email"],"additionalProperties":false}]}},
			"required":["user","tags","contact"],"additionalProperties":false,
			"$defs":{"tag":{"type":"object","properties":{"label":{"type":["string","null"]}},"required":["label"],"additionalProperties":false}}}`, true},
		{"property not required", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, false},
		{"additionalProperties missing", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false},
		{"additionalProperties true", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":true}`, false},
		{"additionalProperties schema", `{"type":"object","properties":{},"additionalProperties":{"type":"string"}}`, false},
		{"loose nested object", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}},"required":["a"],"additionalProperties":false}`, false},
		{"loose object in items", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}}},"required":["a"],"additionalProperties":false}`, false},
		{"loose object in $defs", `{"type":"object","properties":{},"additionalProperties":false,"$defs":{"x":{"type":"object","properties":{"b":{"type":"string"}}}}}`, false},
		{"loose object in anyOf", `{"type":"object","properties":{"a":{"anyOf":[{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]},{"type":"null"}]}},"required":["a"],"additionalProperties":false}`, false},
		{"untyped object with properties", `{"properties":{"a":{"type":"string"}},"required":["a"]}`, false},
		{"root is not an object", `{"type":"array","items":{"type":"string"}}`, false},
		{"root anyOf", `{"type":"object","anyOf":[{"type":"object","properties":{},"additionalProperties":false}],"properties":{},"additionalProperties":false}`, false},
		{"minLength is unsupported", `{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"],"additionalProperties":false}`, false},
		{"allOf is unsupported", `{"type":"object","properties":{},"additionalProperties":false,"allOf":[{"type":"object"}]}`, false},
		{"boolean subschema", `{"type":"object","properties":{"a":true},"required":["a"],"additionalProperties":false}`, false},
		{"not JSON", `{`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strictCompatible(json.RawMessage(tt.schema)); got != tt.want {
				t.Errorf("strictCompatible = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestToolInput(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"object", `{"location": "Boston, MA"}`, `{"location":"Boston, MA"}`},
		{"empty", ``, `{}`},
		{"blank", `  `, `{}`},
		{"truncated", `{"location": "Par`, `{"_invalid_arguments":"{\"location\": \"Par"}`},
		{"array", `["Boston"]`, `{"_invalid_arguments":"[\"Boston\"]"}`},
		{"string", `"Boston"`, `{"_invalid_arguments":"\"Boston\""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, string(toolInput(tt.args))); diff != "" {
				t.Errorf("toolInput (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStopReason(t *testing.T) {
	tests := []struct{ name, finish, want string }{
		{"stop", "stop", sampler.StopEndTurn},
		{"length", "length", sampler.StopMaxTokens},
		{"tool_calls", "tool_calls", sampler.StopToolUse},
		{"function_call", "function_call", sampler.StopToolUse},
		{"content_filter", "content_filter", sampler.StopRefusal},
		{"null", "", ""},
		{"unknown passes through", "eos", "eos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stopReason(tt.finish); got != tt.want {
				t.Errorf("stopReason(%q) = %q, want %q", tt.finish, got, tt.want)
			}
		})
	}
}

func TestName(t *testing.T) {
	tests := []struct{ name, opt, want string }{
		{"default", "", "openai"},
		{"configured", "vllm", "vllm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(Options{Name: tt.opt}).Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStrictCache checks that the cache answers as strictCompatible does,
// call after call and schema by schema, and that it stays bounded.
func TestStrictCache(t *testing.T) {
	loose := `{"type":"object","properties":{"a":{"type":"string"}}}`
	c := newStrictCache()
	calls := []struct {
		schema string
		want   bool
	}{{eventSchema, true}, {loose, false}, {eventSchema, true}, {loose, false}}
	for i, call := range calls {
		if got := c.compatible(json.RawMessage(call.schema)); got != call.want {
			t.Errorf("call %d: compatible(%s) = %v, want %v", i, call.schema, got, call.want)
		}
	}
	if n := len(c.m); n != 2 {
		t.Errorf("the cache holds %d entries after two schemas, want 2", n)
	}
	for i := range maxStrictCache + 10 {
		schema := fmt.Sprintf(`{"type":"object","properties":{},"additionalProperties":false,"description":"%d"}`, i)
		if !c.compatible(json.RawMessage(schema)) {
			t.Fatalf("compatible(%s) = false, want true", schema)
		}
	}
	if n := len(c.m); n > maxStrictCache {
		t.Errorf("the cache holds %d entries, more than %d", n, maxStrictCache)
	}
}

// TestReplyTextString: a reply's string content reads as encoding/json
// reads the string, escapes and invalid UTF-8 included.
func TestReplyTextString(t *testing.T) {
	p := New(Options{BaseURL: "http://127.0.0.1:0"})
	for _, in := range []string{`""`, `"Paris."`, `"say \"hi\""`, `"a\\b"`, `"\u00e9t\u00e9"`, `"line\nbreak"`,
		"\"h\xc3\xa9llo\"", "\"bad \xff utf-8\"", `"\ud83d\ude00"`, `"<b>&amp;</b>"`} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		var cr chat.Response
		if err := json.Unmarshal([]byte(`{"choices":[{"message":{"content":`+in+`},"finish_reason":"stop"}]}`), &cr); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		resp, err := p.decodeResponse(200, &cr)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var got string
		for _, c := range resp.Content {
			got += c.Text
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
}
