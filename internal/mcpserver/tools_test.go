package mcpserver_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/testing/testwait"
)

var agentTools = []string{"agent_analyze", "agent_classify", "agent_compare", "agent_decide", "agent_delegate", "agent_extract", "agent_generate", "agent_summarize", "sample"}

func TestToolsList(t *testing.T) {
	s := start(t, map[string]string{}, "")
	cs := connect(t, s.url, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil || tl.OutputSchema == nil || tl.Description == "" {
			t.Errorf("%s: want a description, an inputSchema and an outputSchema", tl.Name)
		}
		in, _ := tl.InputSchema.(map[string]any)
		out, _ := tl.OutputSchema.(map[string]any)
		if in["type"] != "object" || out["type"] != "object" {
			t.Errorf("%s: schemas of type %v and %v, want object", tl.Name, in["type"], out["type"])
		}
	}
	sort.Strings(names)
	if diff := cmp.Diff(agentTools, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

// TestEveryToolOnTheOfflineProvider calls each shaped tool with sampled
// sampling (the client declares no sampling) and checks the answer against
// the tool's declared outputSchema and the call's own constraints.
func TestEveryToolOnTheOfflineProvider(t *testing.T) {
	s := start(t, map[string]string{}, "")
	cs := connect(t, s.url, nil)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	outputSchema := map[string]any{}
	for _, tl := range list.Tools {
		outputSchema[tl.Name] = tl.OutputSchema
	}
	person := map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer", "minimum": 0}},
		"required": []string{"name", "age"}, "additionalProperties": false}
	tests := []struct {
		tool  string
		args  map[string]any
		check func(t *testing.T, out map[string]any)
	}{
		{"agent_decide", map[string]any{"question": "Which database?", "options": []string{"postgres", "sqlite", "redis"}, "context": "a small web app"},
			func(t *testing.T, out map[string]any) {
				if !slices.Contains([]any{"postgres", "sqlite", "redis"}, out["choice"]) {
					t.Errorf("choice %v is not an option", out["choice"])
				}
			}},
		{"agent_decide", map[string]any{"question": "Ship it today?"},
			func(t *testing.T, out map[string]any) {
				if out["choice"] != "yes" && out["choice"] != "no" {
					t.Errorf("choice %v, want yes or no", out["choice"])
				}
			}},
		{"agent_analyze", map[string]any{"data": map[string]any{"errors": 12, "requests": 1000}, "focus": "reliability"}, nil},
		{"agent_extract", map[string]any{"text": "Ada Lovelace was 36.", "schema": person},
			func(t *testing.T, out map[string]any) { validate(t, person, out["value"]) }},
		{"agent_classify", map[string]any{"text": "The invoice is overdue.", "categories": []string{"billing", "support", "sales"}},
			func(t *testing.T, out map[string]any) {
				labels, _ := out["labels"].([]any)
				if len(labels) != 1 || !slices.Contains([]any{"billing", "support", "sales"}, labels[0]) {
					t.Errorf("labels %v, want one category", labels)
				}
				scores, _ := out["scores"].(map[string]any)
				if len(scores) != 3 {
					t.Errorf("scores %v, want one per category", scores)
				}
			}},
		{"agent_classify", map[string]any{"text": "Refund and upgrade, please.", "categories": []string{"billing", "support", "sales"}, "multiLabel": true},
			func(t *testing.T, out map[string]any) {
				for _, l := range out["labels"].([]any) {
					if !slices.Contains([]any{"billing", "support", "sales"}, l) {
						t.Errorf("label %v is not a category", l)
					}
				}
			}},
		{"agent_summarize", map[string]any{"text": strings.Repeat("The service samples models for programs. ", 20), "maxWords": 5},
			func(t *testing.T, out map[string]any) {
				if n := len(strings.Fields(out["summary"].(string))); n > 6 { // five words and the mark of the cut
					t.Errorf("summary of %d words, want at most 5: %q", n, out["summary"])
				}
			}},
		{"agent_generate", map[string]any{"instructions": "Write a haiku about Go."},
			func(t *testing.T, out map[string]any) {
				if c, _ := out["content"].(string); c == "" || out["format"] != "text" {
					t.Errorf("content %v, format %v", out["content"], out["format"])
				}
			}},
		{"agent_generate", map[string]any{"instructions": "A person.", "schema": person},
			func(t *testing.T, out map[string]any) {
				validate(t, person, out["content"])
				if out["format"] != "json" {
					t.Errorf("format %v, want json", out["format"])
				}
			}},
		{"agent_compare", map[string]any{"options": []string{"go", "rust", "zig"}, "criteria": []string{"simplicity"}},
			func(t *testing.T, out map[string]any) {
				var ranking []string
				for _, r := range out["ranking"].([]any) {
					ranking = append(ranking, r.(string))
				}
				sort.Strings(ranking)
				if diff := cmp.Diff([]string{"go", "rust", "zig"}, ranking); diff != "" {
					t.Errorf("ranking is not the options (-want +got):\n%s", diff)
				}
				if !slices.Contains([]any{"go", "rust", "zig"}, out["best"]) {
					t.Errorf("best %v is not an option", out["best"])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			out := structured(t, callTool(t, cs, tt.tool, tt.args))
			validate(t, outputSchema[tt.tool], out)
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
	if got := s.toolCalls(t, "agent_decide", "service", "ok"); got != 2 {
		t.Errorf("sampled_mcp_tool_calls_total{tool=agent_decide,sampler=service,outcome=ok} = %v, want 2", got)
	}
}

func TestInvalidArgumentsAreToolErrors(t *testing.T) {
	s := start(t, map[string]string{}, "")
	cs := connect(t, s.url, nil)
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"agent_decide", map[string]any{"options": []string{"a", "b"}}, "question"},
		{"agent_decide", map[string]any{"question": "q", "options": []string{"only"}}, "/options"},
		{"agent_classify", map[string]any{"text": "t", "categories": []string{"a", "b"}, "extra": 1}, "extra"},
		{"agent_extract", map[string]any{"text": "t", "schema": map[string]any{"type": "nonsense"}}, "/schema"},
		{"agent_generate", map[string]any{"instructions": "i", "format": "code", "schema": map[string]any{"type": "object"}}, "/schema: schema needs format json"},
		{"agent_delegate", map[string]any{"goal": "g", "maxIterations": 0}, "/maxIterations"},
		{"agent_delegate", map[string]any{"goal": "g", "allowedTools": []string{"[bad"}}, "/allowedTools/0"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.want, func(t *testing.T) {
			res := callTool(t, cs, tt.tool, tt.args)
			if !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Errorf("isError %v, text %q; want an error naming %q", res.IsError, text(res), tt.want)
			}
		})
	}
	if got := s.toolCalls(t, "agent_decide", "none", "invalid_arguments"); got != 2 {
		t.Errorf("invalid agent_decide calls counted %v, want 2", got)
	}
}

// TestServiceRetriesReportProgress: the flaky model's first answer fails
// validation; the corrective retry is reported as progress and the answer
// is valid.
func TestServiceRetriesReportProgress(t *testing.T) {
	s := start(t, map[string]string{"SAMPLING_MODEL": "flaky"}, "")
	progress := make(chan *mcp.ProgressNotificationParams, 10)
	cs := connect(t, s.url, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress <- r.Params
	}})
	params := &mcp.CallToolParams{Name: "agent_decide", Arguments: map[string]any{"question": "Tea or coffee?", "options": []string{"tea", "coffee"}}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	out := structured(t, res)
	if out["choice"] != "tea" && out["choice"] != "coffee" {
		t.Errorf("choice %v", out["choice"])
	}
	p := testwait.Recv(t, progress, "the retry's progress notification") // sent before the result, handled after it may have arrived
	if p.ProgressToken != "p1" || p.Progress != 1 || !strings.Contains(p.Message, "failed validation") {
		t.Errorf("progress %+v, want token p1, progress 1 and a message about the retry", p)
	}
}

// TestServiceExhaustionIsAToolError: the broken model never answers
// validly; the result is isError with the validation errors, not a
// protocol error.
func TestServiceExhaustionIsAToolError(t *testing.T) {
	s := start(t, map[string]string{"SAMPLING_MODEL": "broken"}, "")
	cs := connect(t, s.url, nil)
	res := callTool(t, cs, "agent_summarize", map[string]any{"text": "Some text to summarize."})
	if !res.IsError || !strings.Contains(text(res), "no valid answer after 3 attempts") || !strings.Contains(text(res), "\n- /") {
		t.Errorf("isError %v, text %q; want the exhaustion with its errors", res.IsError, text(res))
	}
	if res.StructuredContent != nil {
		t.Errorf("structuredContent %v on an error", res.StructuredContent)
	}
	if got := s.toolCalls(t, "agent_summarize", "service", "exhausted"); got != 1 {
		t.Errorf("exhausted calls counted %v, want 1", got)
	}
}

// TestSampleTool: sampling/createMessage as a tool, on sampled's providers.
func TestSampleTool(t *testing.T) {
	s := start(t, map[string]string{}, "")
	cs := connect(t, s.url, nil)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var output any
	for _, tl := range list.Tools {
		if tl.Name == "sample" {
			output = tl.OutputSchema
		}
	}
	out := structured(t, callTool(t, cs, "sample", map[string]any{"maxTokens": 50,
		"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "Hello"}}}}))
	validate(t, output, out)
	block, _ := out["content"].(map[string]any)
	if out["role"] != "assistant" || block["type"] != "text" || !strings.Contains(block["text"].(string), "Hello") {
		t.Errorf("result %v", out)
	}
	out = structured(t, callTool(t, cs, "sample", map[string]any{"maxTokens": 50, "toolChoice": map[string]any{"mode": "required"},
		"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "weather in Paris"}}},
		"tools":    []any{map[string]any{"name": "get_weather", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}))
	validate(t, output, out)
	if block, _ := out["content"].(map[string]any); block["type"] != "tool_use" || out["stopReason"] != "toolUse" {
		t.Errorf("result %v, want a tool_use", out)
	}
	res := callTool(t, cs, "sample", map[string]any{"maxTokens": 50, "messages": []any{
		map[string]any{"role": "user", "content": map[string]any{"type": "tool_result", "toolUseId": "x", "content": []any{}}}}})
	if !res.IsError || !strings.Contains(text(res), "/messages/0") {
		t.Errorf("isError %v, %q; want an error naming /messages/0", res.IsError, text(res))
	}
}
