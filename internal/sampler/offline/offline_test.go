package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	p := New(nil)
	if got := p.Name(); got != "offline" {
		t.Errorf("Name() = %q, want offline", got)
	}
	if diff := cmp.Diff([]string{"default", "flaky", "broken", "slow"}, p.Models()); diff != "" {
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
			req:  sampler.Request{Model: "flaky", Messages: []sampler.Message{userText("hello")}},
			want: &sampler.Response{
				Model:      "flaky",
				Content:    []sampler.Content{sampler.TextBlock(`[offline] You said: "hello"`)},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 1, OutputTokens: 4},
			},
		},
		{
			name: "broken behaves like default in plain mode",
			req:  sampler.Request{Model: "broken", Messages: []sampler.Message{userText("hello")}},
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
			got, err := New(nil).Sample(context.Background(), &tt.req)
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
			wantErr: "offline: schema: schema is not valid JSON",
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
			got, err := New(nil).Sample(tt.ctx, tt.req)
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
			// The city comes from the text, never from the schema's
			// examples: a call about Paris would answer another question.
			name:      "required without a match calls the first tool",
			messages:  []sampler.Message{userText("Tell me a joke")},
			choice:    &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired},
			wantTool:  "get_weather",
			wantInput: `{"city":"joke","units":"celsius"}`,
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
			got, err := New(nil).Sample(context.Background(), req)
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

			again, err := New(nil).Sample(context.Background(), req)
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
			got, err := New(nil).Sample(context.Background(), req)
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
	p := New(nil)
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

// withCorrection returns msgs followed by the answer and a corrective user
// turn as a guaranteed helper sends them: text after an answer without tool
// calls, an error tool_result for each call otherwise.
func withCorrection(msgs []sampler.Message, answer []sampler.Content) []sampler.Message {
	fix := sampler.UserMessage(sampler.TextBlock("Your previous answer is not acceptable. Fix these errors and answer again:\n- /: invalid JSON"))
	if calls := sampler.ToolCallsOf(answer); len(calls) > 0 {
		fix.Content = nil
		for _, c := range calls {
			fix.Content = append(fix.Content, sampler.Content{Type: sampler.BlockToolResult, ToolUseID: c.ID, IsError: boolPtr(true),
				Content: []sampler.Content{sampler.TextBlock("Invalid tool call. Fix these errors")}})
		}
	}
	return append(append(append([]sampler.Message{}, msgs...), sampler.AssistantMessage(answer...)), fix)
}

// isBroken reports whether resp is the broken answer of its mode: text that
// is not JSON (schema), no tool call (tools).
func isBroken(t *testing.T, resp *sampler.Response, mode string) bool {
	t.Helper()
	if mode == sampler.ModeSchema {
		return !json.Valid([]byte(sampler.TextOf(resp.Content)))
	}
	calls := sampler.ToolCallsOf(resp.Content)
	if (len(calls) == 0) != (resp.StopReason == sampler.StopEndTurn) {
		t.Errorf("calls %+v with stop reason %q", calls, resp.StopReason)
	}
	return len(calls) == 0
}

// TestFaultModels runs the attempts of a guaranteed helper, which stops at
// the first answer that is not broken: flaky breaks the first attempt and
// answers well once the conversation holds its broken answer and a
// correction; broken breaks every attempt.
func TestFaultModels(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"score":{"type":"integer","minimum":1}},"required":["answer","score"]}`)
	history := []sampler.Message{userText("hi"), assistantText("[offline] hello"), userText("What's the weather in Paris?")}
	type request struct {
		schema json.RawMessage
		choice *sampler.ToolChoice
	}
	modes := map[string]request{
		"schema":         {schema: schema},
		"scalar schema":  {schema: json.RawMessage(`{"type":"integer"}`)},
		"string schema":  {schema: json.RawMessage(`{"type":"string"}`)},
		"tools auto":     {},
		"tools required": {choice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}},
		"tools forced":   {choice: &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: "get_weather"}},
	}
	tests := []struct {
		model string
		// want lists, per attempt, whether it is broken.
		want []bool
	}{
		{"default", []bool{false}},
		{"flaky", []bool{true, false}},
		{"broken", []bool{true, true, true}},
	}
	for _, tt := range tests {
		for name, r := range modes {
			for _, start := range [][]sampler.Message{history[2:], history} {
				t.Run(fmt.Sprintf("%s %s after %d messages", tt.model, name, len(start)-1), func(t *testing.T) {
					req := &sampler.Request{Model: tt.model, Schema: r.schema, ToolChoice: r.choice, Messages: start}
					if r.schema == nil {
						req.Tools = testTools()
					}
					var got []bool
					for range 3 {
						resp, err := New(nil).Sample(context.Background(), req)
						if err != nil {
							t.Fatalf("Sample: %v", err)
						}
						if resp.Model != tt.model {
							t.Errorf("model = %q, want %q", resp.Model, tt.model)
						}
						broken := isBroken(t, resp, req.Mode())
						got = append(got, broken)
						if !broken {
							if req.Mode() == sampler.ModeSchema {
								mustValidate(t, r.schema, []byte(sampler.TextOf(resp.Content)))
							} else if diff := cmp.Diff(`{"city":"Paris","units":"celsius"}`, string(resp.Content[0].Input)); diff != "" {
								t.Errorf("arguments (-want +got):\n%s", diff)
							}
							break
						}
						req.Messages = withCorrection(req.Messages, resp.Content)
					}
					if diff := cmp.Diff(tt.want, got); diff != "" {
						t.Errorf("broken attempts (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// TestFlakyKnowsItsOwnBrokenAnswer: only flaky's own broken answer followed
// by a user turn marks a retry.
func TestFlakyKnowsItsOwnBrokenAnswer(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)
	task := userText("What's the weather in Paris?")
	fix := userText("Your previous answer is not acceptable. Fix these errors")
	first := func(req *sampler.Request) sampler.Message {
		resp, err := New(nil).Sample(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return sampler.AssistantMessage(resp.Content...)
	}
	schemaReq := &sampler.Request{Model: "flaky", Schema: schema, Messages: []sampler.Message{task}}
	toolsReq := &sampler.Request{Model: "flaky", Tools: testTools(), ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}, Messages: []sampler.Message{task}}
	ownJSON, ownText := first(schemaReq), first(toolsReq)
	invalidCall := sampler.AssistantMessage(sampler.Content{Type: sampler.BlockToolUse, ID: "c1", Name: "get_weather", Input: json.RawMessage(`{}`)})
	callFix := sampler.UserMessage(sampler.Content{Type: sampler.BlockToolResult, ToolUseID: "c1", IsError: boolPtr(true), Content: []sampler.Content{sampler.TextBlock("Invalid tool call.")}})
	tests := []struct {
		name       string
		req        *sampler.Request
		messages   []sampler.Message
		wantBroken bool
	}{
		{"schema first attempt", schemaReq, []sampler.Message{task}, true},
		{"schema after its broken answer and a correction", schemaReq, []sampler.Message{task, ownJSON, fix}, false},
		{"schema broken answer not yet corrected", schemaReq, []sampler.Message{task, ownJSON}, true},
		{"schema after other malformed JSON and a correction", schemaReq, []sampler.Message{task, assistantText(`{"title":`), fix}, true},
		{"schema after a valid answer and a follow-up", schemaReq, []sampler.Message{task, assistantText(`{"title":"x"}`), fix}, true},
		{"tools first attempt", toolsReq, []sampler.Message{task}, true},
		{"tools after its answer without a call and a correction", toolsReq, []sampler.Message{task, ownText, fix}, false},
		{"tools after another text answer and a follow-up", toolsReq, []sampler.Message{task, assistantText("[offline] hello"), fix}, true},
		{"tools after an invalid call and error results", toolsReq, []sampler.Message{task, ownText, fix, invalidCall, callFix}, false},
		{"tools after error results only", toolsReq, []sampler.Message{task, invalidCall, callFix}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := *tt.req
			req.Messages = tt.messages
			resp, err := New(nil).Sample(context.Background(), &req)
			if err != nil {
				t.Fatal(err)
			}
			if got := isBroken(t, resp, req.Mode()); got != tt.wantBroken {
				t.Errorf("broken = %v, want %v (answer %+v)", got, tt.wantBroken, resp.Content)
			}
		})
	}
}

func TestFlakyRetryMatchesDefault(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)
	def, err := New(nil).Sample(context.Background(), schemaRequest("default", schema, "a title please"))
	if err != nil {
		t.Fatal(err)
	}
	broken, err := New(nil).Sample(context.Background(), schemaRequest("broken", schema, "a title please"))
	if err != nil {
		t.Fatal(err)
	}
	want := def.Content[0].Text[:len(def.Content[0].Text)-1]
	if diff := cmp.Diff(want, broken.Content[0].Text); diff != "" {
		t.Errorf("broken text (-want +got):\n%s", diff)
	}
	req := schemaRequest("flaky", schema, "a title please")
	req.Messages = withCorrection(req.Messages, broken.Content)
	flaky, err := New(nil).Sample(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(def.Content, flaky.Content); diff != "" {
		t.Errorf("flaky's retry differs from default (-default +flaky):\n%s", diff)
	}
}

// TestSchemaSeedIsTheTask: after a corrective turn, free-form strings still
// come from the task, not from the correction.
func TestSchemaSeedIsTheTask(t *testing.T) {
	req := schemaRequest("flaky", json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`), "Invent a person called Ada")
	first, err := New(nil).Sample(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.Messages = withCorrection(req.Messages, first.Content)
	resp, err := New(nil).Sample(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if isBroken(t, resp, sampler.ModeSchema) {
		t.Fatalf("retry answer %s is broken", sampler.TextOf(resp.Content))
	}
	text := sampler.TextOf(resp.Content)
	if strings.Contains(text, "previous") || strings.Contains(text, "Fix") {
		t.Errorf("answer %s is seeded by the correction, not the task", text)
	}
}

// The input schemas of sampled's std tools calculate and text_stats, with
// their examples (internal/tools/std.go).
const (
	stdCalculateSchema = `{"type":"object","properties":{"expression":{"type":"string","description":"An arithmetic expression.",` +
		`"examples":["2 * (3 + 4)","-1.5 ^ 2 + 10 % 4"]}},"required":["expression"],"additionalProperties":false,"examples":[{"expression":"2 * (3 + 4)"}]}`
	stdTextStatsSchema = `{"type":"object","properties":{"text":{"type":"string","description":"The text to measure.",` +
		`"examples":["The quick brown fox jumps over the lazy dog."]}},"required":["text"],"additionalProperties":false,"examples":[{"text":"Hello world. How are you?\nFine!"}]}`
)

// TestToolArgumentsComeFromTheText: a tool call's arguments are taken from
// what the user wrote, never copied from the schema's examples, so that a
// call answers the question asked or visibly fails — never a right-looking
// answer to another question.
func TestToolArgumentsComeFromTheText(t *testing.T) {
	tools := []sampler.Tool{
		{Name: "calculate", Description: "Evaluate an arithmetic expression and return its value.", InputSchema: json.RawMessage(stdCalculateSchema)},
		{Name: "text_stats", Description: "Count the characters, words, lines and sentences of a text.", InputSchema: json.RawMessage(stdTextStatsSchema)},
		{Name: "get_weather", Description: "Get the current weather for a city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","examples":["Lyon"]}},"required":["city"]}`)},
	}
	tests := []struct {
		prompt    string
		wantTool  string
		wantInput string
	}{
		{"Please calculate 2 * (3 + 4)", "calculate", `{"expression":"2 * (3 + 4)"}`},
		{"calculate 1 / 0", "calculate", `{"expression":"1 / 0"}`},
		{"Please calculate (100 - 7.5) / 3.", "calculate", `{"expression":"(100 - 7.5) / 3"}`},
		{"What is 6*7? Calculate it.", "calculate", `{"expression":"6*7"}`},
		{"calculate (2 + 3", "calculate", `{"expression":"2 + 3"}`},
		{"calculate the meaning of life", "calculate", `{"expression":"calculate the meaning of life"}`},
		{"calculate the sum of 2 and 3", "calculate", `{"expression":"calculate the sum of 2 and 3"}`},
		{"How many words are in this sentence? Use text stats.", "text_stats", `{"text":"How many words are in this sentence? Use text stats."}`},
		{"What's the weather in Paris?", "get_weather", `{"city":"Paris"}`},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			resp, err := New(nil).Sample(context.Background(), &sampler.Request{Model: ModelDefault, Tools: tools,
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}, Messages: []sampler.Message{userText(tt.prompt)}})
			if err != nil {
				t.Fatal(err)
			}
			calls := sampler.ToolCallsOf(resp.Content)
			if len(calls) != 1 {
				t.Fatalf("calls %+v, want one", calls)
			}
			if diff := cmp.Diff(tt.wantTool+" "+tt.wantInput, calls[0].Name+" "+string(calls[0].Arguments)); diff != "" {
				t.Errorf("call (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArithmetic(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Please calculate 2 * (3 + 4)", "2 * (3 + 4)"},
		{"calculate 1 / 0.", "1 / 0"},
		{"(what is 3 ^ 2)", "3 ^ 2"},
		{"-1.5 ^ 2 + 10 % 4", "-1.5 ^ 2 + 10 % 4"},
		{"add 2 and 3", ""},
		{"In 2024, what is 2+2?", ""},
		{"no numbers here - or (there)", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := arithmetic(tt.in); got != tt.want {
			t.Errorf("arithmetic(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
