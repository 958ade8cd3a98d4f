package offline

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/sampler"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func userText(s string) sampler.Message {
	return sampler.Message{Role: sampler.RoleUser, Content: []sampler.Content{sampler.TextBlock(s)}}
}

func assistantText(s string) sampler.Message {
	return sampler.Message{Role: sampler.RoleAssistant, Content: []sampler.Content{sampler.TextBlock(s)}}
}

func boolPtr(b bool) *bool { return &b }

func TestNameAndModels(t *testing.T) {
	var p Provider // the zero value is ready to use
	if got := p.Name(); got != "offline" {
		t.Errorf("Name() = %q, want offline", got)
	}
	if diff := cmp.Diff([]string{"default", "flaky", "broken"}, p.Models()); diff != "" {
		t.Errorf("Models() (-want +got):\n%s", diff)
	}
}

func TestPlain(t *testing.T) {
	long := strings.Repeat("abcdefghij", 30) // 300 runes
	tests := []struct {
		name string
		req  sampler.Request
		want *sampler.Response
	}{
		{
			name: "echoes the last user text",
			req:  sampler.Request{Model: "default", Messages: []sampler.Message{userText("first question"), assistantText("an answer"), userText("second question")}},
			want: &sampler.Response{
				Model:      "default",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "second question"`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 6, OutputTokens: 5},
			},
		},
		{
			name: "empty model is default",
			req:  sampler.Request{Messages: []sampler.Message{userText("hi")}, SystemPrompt: "be brief"},
			want: &sampler.Response{
				Model:      "default",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "hi"`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 3, OutputTokens: 4},
			},
		},
		{
			name: "long text is truncated",
			req:  sampler.Request{Model: "default", Messages: []sampler.Message{userText(long)}},
			want: &sampler.Response{
				Model:      "default",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "` + long[:200] + `…"`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 1, OutputTokens: 4},
			},
		},
		{
			name: "maxTokens cuts the words",
			req:  sampler.Request{Model: "default", MaxTokens: 4, Messages: []sampler.Message{userText("one two three four five")}},
			want: &sampler.Response{
				Model:      "default",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "one`)},
				StopReason: sampler.StopMaxTokens,
				Usage:      sampler.Usage{InputTokens: 5, OutputTokens: 4},
			},
		},
		{
			name: "maxTokens equal to the word count",
			req:  sampler.Request{Model: "default", MaxTokens: 8, Messages: []sampler.Message{userText("one two three four five")}},
			want: &sampler.Response{
				Model:      "default",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "one two three four five"`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 5, OutputTokens: 8},
			},
		},
		{
			name: "flaky behaves like default in plain mode",
			req:  sampler.Request{Model: "flaky", Attempt: 1, Messages: []sampler.Message{userText("hello")}},
			want: &sampler.Response{
				Model:      "flaky",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "hello"`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 1, OutputTokens: 4},
			},
		},
		{
			name: "broken behaves like default in plain mode",
			req:  sampler.Request{Model: "broken", Attempt: 3, Messages: []sampler.Message{userText("hello")}},
			want: &sampler.Response{
				Model:      "broken",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "hello"`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 1, OutputTokens: 4},
			},
		},
		{
			name: "non-text message",
			req:  sampler.Request{Model: "default", Messages: []sampler.Message{{Role: sampler.RoleUser, Content: []sampler.Content{{Type: sampler.BlockImage, Data: "AAAA", MIMEType: "image/png"}}}}},
			want: &sampler.Response{
				Model:      "default",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You sent no text, only image content.`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 1, OutputTokens: 8},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New().Sample(context.Background(), &tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sample (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		req     *sampler.Request
		wantErr string
		wantIs  error
	}{
		{
			name:    "unknown model",
			ctx:     context.Background(),
			req:     &sampler.Request{Model: "gpt-9", Messages: []sampler.Message{userText("hi")}},
			wantErr: `offline: unknown model "gpt-9"`,
		},
		{
			name:    "cancelled context",
			ctx:     cancelled,
			req:     &sampler.Request{Model: "default", Messages: []sampler.Message{userText("hi")}},
			wantErr: context.Canceled.Error(),
			wantIs:  context.Canceled,
		},
		{
			name:    "unparsable schema",
			ctx:     context.Background(),
			req:     &sampler.Request{Model: "default", Schema: json.RawMessage(`{"type":`), Messages: []sampler.Message{userText("hi")}},
			wantErr: "offline: schema: invalid JSON",
		},
		{
			name: "forced unknown tool",
			ctx:  context.Background(),
			req: &sampler.Request{
				Model:      "default",
				Messages:   []sampler.Message{userText("hi")},
				Tools:      testTools(),
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "launch_rocket"},
			},
			wantErr: `offline: tool "launch_rocket" is not among the request's tools`,
		},
		{
			name: "forced unknown tool on a broken model",
			ctx:  context.Background(),
			req: &sampler.Request{
				Model:      "broken",
				Messages:   []sampler.Message{userText("hi")},
				Tools:      testTools(),
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "launch_rocket"},
			},
			wantErr: `offline: tool "launch_rocket" is not among the request's tools`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New().Sample(tt.ctx, tt.req)
			if err == nil {
				t.Fatalf("Sample = %+v, want error %q", got, tt.wantErr)
			}
			if got != nil {
				t.Errorf("Sample returned a response with the error: %+v", got)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("error = %q, want %q", err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
		})
	}
}

const (
	weatherSchema = `{"type":"object","properties":{"city":{"type":"string","examples":["Paris"]},"units":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`
	searchSchema  = `{"type":"object","properties":{"query":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":50,"default":10}},"required":["query"],"additionalProperties":false}`
	emailSchema   = `{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string","maxLength":20},"sendAt":{"type":"string","format":"date-time"}},"required":["to","subject"]}`
)

func testTools() []sampler.Tool {
	return []sampler.Tool{
		{Name: "get_weather", Description: "Get the current weather for a city", InputSchema: json.RawMessage(weatherSchema)},
		{Name: "searchDocs", Description: "Search the product documentation", InputSchema: json.RawMessage(searchSchema)},
		{Name: "mail.send", Description: "Send an email message to a recipient", InputSchema: json.RawMessage(emailSchema)},
	}
}

func schemaOf(tools []sampler.Tool, name string) json.RawMessage {
	for _, t := range tools {
		if t.Name == name {
			return t.InputSchema
		}
	}
	return nil
}

func TestTools(t *testing.T) {
	callIDPattern := regexp.MustCompile(`^call_[0-9a-f]{8}$`)
	weatherCall := sampler.Content{Type: sampler.BlockToolUse, ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}
	afterResults := []sampler.Message{
		userText("What's the weather in Paris?"),
		{Role: sampler.RoleAssistant, Content: []sampler.Content{weatherCall}},
		{Role: sampler.RoleUser, Content: []sampler.Content{{
			Type: sampler.BlockToolResult, ToolUseID: "call_1",
			Content: []sampler.Content{sampler.TextBlock("Weather in Paris: 18°C")},
		}}},
	}
	tests := []struct {
		name     string
		messages []sampler.Message
		choice   *sampler.ToolChoice
		// wantTool is the tool called, "" for a text answer.
		wantTool  string
		wantInput string
		// wantText is a substring of the text answer.
		wantText string
	}{
		{
			name:      "auto with a matching name",
			messages:  []sampler.Message{userText("What's the weather in Paris?")},
			wantTool:  "get_weather",
			wantInput: `{"city":"Paris","units":"celsius"}`,
		},
		{
			name:      "auto matches a camelCase name and description",
			messages:  []sampler.Message{userText("Could you search the documentation for rate limits")},
			wantTool:  "searchDocs",
			wantInput: `{"query":"Could you search the documentation for rate limits","limit":10}`,
		},
		{
			name:      "auto matches a dotted name",
			messages:  []sampler.Message{userText("Send an email to Bob")},
			choice:    &sampler.ToolChoice{Mode: sampler.ToolChoiceAuto},
			wantTool:  "mail.send",
			wantInput: `{"to":"user@example.com","subject":"Send email Bob","sendAt":"2025-01-01T00:00:00Z"}`,
		},
		{
			name:     "auto without a match answers in text",
			messages: []sampler.Message{userText("Tell me a joke")},
			wantText: `[offline] You said: "Tell me a joke"`,
		},
		{
			name:     "stop words do not match",
			messages: []sampler.Message{userText("get the current thing")},
			wantText: `You said: "get the current thing"`,
		},
		{
			name:     "none answers in text even when a tool matches",
			messages: []sampler.Message{userText("What's the weather in Paris?")},
			choice:   &sampler.ToolChoice{Mode: sampler.ToolChoiceNone},
			wantText: `[offline] You said: "What's the weather in Paris?"`,
		},
		{
			name:      "required without a match calls the first tool",
			messages:  []sampler.Message{userText("Tell me a joke")},
			choice:    &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired},
			wantTool:  "get_weather",
			wantInput: `{"city":"Paris","units":"celsius"}`,
		},
		{
			name:     "required calls the best match",
			messages: []sampler.Message{userText("search docs please")},
			choice:   &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired},
			wantTool: "searchDocs",
		},
		{
			name:     "forced tool",
			messages: []sampler.Message{userText("What's the weather in Paris?")},
			choice:   &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "mail.send"},
			wantTool: "mail.send",
		},
		{
			name:     "after tool results auto quotes them",
			messages: afterResults,
			wantText: `[offline] Tool results: get_weather → "Weather in Paris: 18°C"`,
		},
		{
			name:     "after tool results none quotes them",
			messages: afterResults,
			choice:   &sampler.ToolChoice{Mode: sampler.ToolChoiceNone},
			wantText: `[offline] Tool results: get_weather → "Weather in Paris: 18°C"`,
		},
		{
			name:      "after tool results required still calls",
			messages:  afterResults,
			choice:    &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired},
			wantTool:  "get_weather",
			wantInput: `{"city":"Paris","units":"celsius"}`,
		},
		{
			name:     "after tool results forced still calls",
			messages: afterResults,
			choice:   &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "searchDocs"},
			wantTool: "searchDocs",
		},
		{
			name: "error and structured results",
			messages: []sampler.Message{
				userText("Weather in Paris and Lyon?"),
				{Role: sampler.RoleAssistant, Content: []sampler.Content{
					{Type: sampler.BlockToolUse, ID: "a", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
					{Type: sampler.BlockToolUse, ID: "b", Name: "get_weather", Input: json.RawMessage(`{"city":"Lyon"}`)},
				}},
				{Role: sampler.RoleUser, Content: []sampler.Content{
					{Type: sampler.BlockToolResult, ToolUseID: "a", StructuredContent: json.RawMessage(`{ "temp": 18 }`)},
					{Type: sampler.BlockToolResult, ToolUseID: "b", IsError: boolPtr(true), Content: []sampler.Content{sampler.TextBlock("city not found")}},
				}},
			},
			wantText: `[offline] Tool results: get_weather → "{\"temp\":18}"; get_weather → error "city not found"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := testTools()
			req := &sampler.Request{Model: "default", Messages: tt.messages, Tools: tools, ToolChoice: tt.choice}
			got, err := New().Sample(context.Background(), req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if len(got.Content) != 1 {
				t.Fatalf("content = %+v, want one block", got.Content)
			}
			block := got.Content[0]
			if tt.wantTool == "" {
				if block.Type != sampler.BlockText || got.StopReason != sampler.StopEndTurn {
					t.Fatalf("got %s block, stop %q; want a text answer with endTurn", block.Type, got.StopReason)
				}
				if !strings.Contains(block.Text, tt.wantText) {
					t.Errorf("text = %q, want it to contain %q", block.Text, tt.wantText)
				}
				return
			}
			if block.Type != sampler.BlockToolUse || got.StopReason != sampler.StopToolUse {
				t.Fatalf("got %s block %q, stop %q; want a tool_use with toolUse", block.Type, block.Text, got.StopReason)
			}
			if diff := cmp.Diff(tt.wantTool, block.Name); diff != "" {
				t.Errorf("tool (-want +got):\n%s", diff)
			}
			if !callIDPattern.MatchString(block.ID) {
				t.Errorf("call id = %q, want call_ and 8 hex digits", block.ID)
			}
			if tt.wantInput != "" {
				if diff := cmp.Diff(tt.wantInput, string(block.Input)); diff != "" {
					t.Errorf("input (-want +got):\n%s", diff)
				}
			}
			mustValidate(t, schemaOf(tools, tt.wantTool), block.Input)

			again, err := New().Sample(context.Background(), req)
			if err != nil {
				t.Fatalf("second Sample: %v", err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("second call differs (-first +second):\n%s", diff)
			}
		})
	}
}

func TestToolsWithoutInputSchema(t *testing.T) {
	tools := []sampler.Tool{
		{Name: "ping", Description: "Ping the server"},
		{Name: "noop", InputSchema: json.RawMessage(`{}`)},
	}
	for _, name := range []string{"ping", "noop"} {
		t.Run(name, func(t *testing.T) {
			req := &sampler.Request{
				Model: "default", Messages: []sampler.Message{userText("ping")}, Tools: tools,
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: name},
			}
			got, err := New().Sample(context.Background(), req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			calls := sampler.ToolCallsOf(got.Content)
			if len(calls) != 1 {
				t.Fatalf("calls = %+v, want one", calls)
			}
			if diff := cmp.Diff("{}", string(calls[0].Arguments)); diff != "" {
				t.Errorf("arguments (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallIDsDiffer(t *testing.T) {
	p := New()
	ids := map[string]string{}
	for _, prompt := range []string{"weather in Paris", "weather in Lyon", "weather in Rome"} {
		req := &sampler.Request{Model: "default", Messages: []sampler.Message{userText(prompt)}, Tools: testTools()}
		got, err := p.Sample(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		calls := sampler.ToolCallsOf(got.Content)
		if len(calls) != 1 {
			t.Fatalf("%q: calls = %+v, want one", prompt, calls)
		}
		if prev, dup := ids[calls[0].ID]; dup {
			t.Errorf("%q and %q share call id %s", prev, prompt, calls[0].ID)
		}
		ids[calls[0].ID] = prompt
	}
}

func TestFaultModels(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"score":{"type":"integer","minimum":1}},"required":["answer","score"]}`)
	tests := []struct {
		name       string
		model      string
		attempt    int
		schema     json.RawMessage
		wantBroken bool
	}{
		{"default attempt 1", "default", 1, schema, false},
		{"flaky attempt 0 counts as first", "flaky", 0, schema, true},
		{"flaky attempt 1", "flaky", 1, schema, true},
		{"flaky attempt 2", "flaky", 2, schema, false},
		{"flaky attempt 3", "flaky", 3, schema, false},
		{"broken attempt 1", "broken", 1, schema, true},
		{"broken attempt 2", "broken", 2, schema, true},
		{"broken attempt 3", "broken", 3, schema, true},
		{"broken scalar", "broken", 2, json.RawMessage(`{"type":"integer"}`), true},
		{"broken string", "broken", 2, json.RawMessage(`{"type":"string"}`), true},
		{"broken boolean", "broken", 2, json.RawMessage(`{"type":"boolean"}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name+" schema", func(t *testing.T) {
			got, err := New().Sample(context.Background(), schemaRequest(tt.model, tt.schema, "rate this", tt.attempt))
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if got.Model != tt.model {
				t.Errorf("model = %q, want %q", got.Model, tt.model)
			}
			text := sampler.TextOf(got.Content)
			if tt.wantBroken {
				if json.Valid([]byte(text)) {
					t.Errorf("text %q is valid JSON, want malformed", text)
				}
				return
			}
			mustValidate(t, tt.schema, []byte(text))
		})
		t.Run(tt.name+" tools", func(t *testing.T) {
			req := &sampler.Request{
				Model: tt.model, Attempt: tt.attempt, Tools: testTools(),
				Messages: []sampler.Message{userText("What's the weather in Paris?")},
			}
			for _, choice := range []*sampler.ToolChoice{nil, {Mode: sampler.ToolChoiceRequired}, {Mode: sampler.ToolChoiceTool, Name: "get_weather"}} {
				req.ToolChoice = choice
				got, err := New().Sample(context.Background(), req)
				if err != nil {
					t.Fatalf("Sample (choice %+v): %v", choice, err)
				}
				calls := sampler.ToolCallsOf(got.Content)
				if tt.wantBroken {
					if len(calls) != 0 || got.StopReason != sampler.StopEndTurn {
						t.Errorf("choice %+v: calls %+v, stop %q; want no call and endTurn", choice, calls, got.StopReason)
					}
					continue
				}
				if len(calls) != 1 || got.StopReason != sampler.StopToolUse {
					t.Errorf("choice %+v: calls %+v, stop %q; want one call and toolUse", choice, calls, got.StopReason)
				}
			}
		})
	}
}

func TestFlakySecondAttemptMatchesDefault(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)
	def, err := New().Sample(context.Background(), schemaRequest("default", schema, "a title please", 1))
	if err != nil {
		t.Fatal(err)
	}
	flaky, err := New().Sample(context.Background(), schemaRequest("flaky", schema, "a title please", 2))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(def.Content, flaky.Content); diff != "" {
		t.Errorf("flaky attempt 2 differs from default (-default +flaky):\n%s", diff)
	}
	broken, err := New().Sample(context.Background(), schemaRequest("broken", schema, "a title please", 1))
	if err != nil {
		t.Fatal(err)
	}
	want := def.Content[0].Text[:len(def.Content[0].Text)-1]
	if diff := cmp.Diff(want, broken.Content[0].Text); diff != "" {
		t.Errorf("broken text (-want +got):\n%s", diff)
	}
}

// TestSchemaSeedIsTheTask: after a corrective turn, free-form strings still
// come from the task, not from the correction.
func TestSchemaSeedIsTheTask(t *testing.T) {
	req := &sampler.Request{Model: "flaky", Attempt: 2, Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		Messages: []sampler.Message{
			{Role: sampler.RoleUser, Content: []sampler.Content{sampler.TextBlock("Invent a person called Ada")}},
			{Role: sampler.RoleAssistant, Content: []sampler.Content{sampler.TextBlock(`{"name":`)}},
			{Role: sampler.RoleUser, Content: []sampler.Content{sampler.TextBlock("Your previous answer is not acceptable. Fix these errors")}},
		}}
	resp, err := New().Sample(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	text := sampler.TextOf(resp.Content)
	if strings.Contains(text, "previous") || strings.Contains(text, "Fix") {
		t.Errorf("answer %s is seeded by the correction, not the task", text)
	}
}
