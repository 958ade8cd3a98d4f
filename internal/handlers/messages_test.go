package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/mcpschema"
)

// TestMessagesRejectsWhatTheSchemaRejects sends inputs the 2025-11-25
// schema forbids, and a few whose error paths used to point nowhere: each
// is a 400 with JSON-RPC's invalid-params code and an error at the JSON
// Pointer of the bad member.
func TestMessagesRejectsWhatTheSchemaRejects(t *testing.T) {
	s := startStack(t, 0)
	const (
		user    = `{"role":"user","content":{"type":"text","text":"weather?"}}`
		weather = `{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}}`
	)
	use := func(blocks string) string { return `{"role":"assistant","content":[` + blocks + `]}` }
	result := func(block string) string { return `{"role":"user","content":[` + block + `]}` }
	const okUse = `{"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Paris"}}`
	body := func(extra string, msgs ...string) string {
		b := `{"maxTokens":20,"messages":[` + strings.Join(msgs, ",") + `]`
		if extra != "" {
			b += "," + extra
		}
		return b + "}"
	}
	tests := []struct {
		name, body, wantPath string
	}{
		// The nine inputs.
		{"metadata as a string", body(`"metadata":"x"`, user), "/metadata"},
		{"costPriority 1.5", body(`"modelPreferences":{"costPriority":1.5}`, user), "/modelPreferences/costPriority"},
		{"toolChoice as a string", body(`"tools":[`+weather+`],"toolChoice":"auto"`, user), "/toolChoice"},
		{"text block without text", body("", `{"role":"user","content":{"type":"text"}}`), "/messages/0/content/text"},
		{"tool_use without input", body("", user, use(`{"type":"tool_use","id":"c1","name":"get_weather"}`),
			result(`{"type":"tool_result","toolUseId":"c1","content":[]}`)), "/messages/1/content/0/input"},
		{"tool_result without content", body("", user, use(okUse), result(`{"type":"tool_result","toolUseId":"c1"}`)), "/messages/2/content/0/content"},
		{"tool_use inside a tool result", body("", user, use(okUse),
			result(`{"type":"tool_result","toolUseId":"c1","content":[`+okUse+`]}`)), "/messages/2/content/0/content/0/type"},
		{"structuredContent as an array", body("", user, use(okUse),
			result(`{"type":"tool_result","toolUseId":"c1","content":[],"structuredContent":[1]}`)), "/messages/2/content/0/structuredContent"},
		{"duplicate tool_use ids", body("", user, use(okUse+","+okUse),
			result(`{"type":"tool_result","toolUseId":"c1","content":[]}`)), "/messages/1/content/1/id"},
		// Unknown top-level members.
		{"unknown member", body(`"prompt":"hi"`, user), "/prompt"},
		// Paths into the body.
		{"maxTokens as a string", `{"maxTokens":"20","messages":[` + user + `]}`, "/maxTokens"},
		{"tool name a number", body(`"tools":[{"name":5,"inputSchema":{"type":"object"}}]`, user), "/tools/0/name"},
		{"tool without inputSchema", body(`"tools":[{"name":"x"}]`, user), "/tools/0/inputSchema"},
		{"toolChoice mode a number", body(`"tools":[`+weather+`],"toolChoice":{"mode":5}`, user), "/toolChoice/mode"},
		{"toolChoice unknown mode", body(`"tools":[`+weather+`],"toolChoice":{"mode":"sometimes"}`, user), "/toolChoice/mode"},
		{"single block content", body("", `{"role":"user","content":{"type":"image","data":"AA=="}}`), "/messages/0/content/mimeType"},
		{"single block answering nothing", body("", `{"role":"user","content":{"type":"tool_result","toolUseId":"nope","content":[]}}`), "/messages/0/content/toolUseId"},
		{"message without role", body("", `{"content":{"type":"text","text":"a"}}`), "/messages/0/role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, out := s.post(t, "/v1/messages", tt.body)
			if status != 400 || out["code"] != float64(invalidParams) {
				t.Fatalf("status %d: %v, want 400 with code %d", status, out, invalidParams)
			}
			if paths := errorPaths(out); !contains(paths, tt.wantPath) {
				t.Errorf("error paths %v do not name %s (%v)", paths, tt.wantPath, out["detail"])
			}
		})
	}
}

// TestMessagesExamplesPass sends the params of every official
// CreateMessageRequest example, and members MCP leaves open on messages and
// blocks: all are answered.
func TestMessagesExamplesPass(t *testing.T) {
	s := startStack(t, 0)
	files, _ := filepath.Glob("../../reference/mcp/examples/CreateMessageRequest/*.json")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var req struct {
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(raw, &req); err != nil {
				t.Fatal(err)
			}
			if status, _, out := s.post(t, "/v1/messages", string(req.Params)); status != 200 {
				t.Errorf("status %d: %v", status, out)
			}
		})
	}
	t.Run("open members", func(t *testing.T) {
		body := `{"maxTokens":20,"_meta":{"progressToken":1},"messages":[{"role":"user","_meta":{"k":"v"},"x-note":1,` +
			`"content":[{"type":"text","text":"hi","annotations":{"priority":0.5},"_meta":{"a":1},"x-block":true}]}]}`
		if status, _, out := s.post(t, "/v1/messages", body); status != 200 {
			t.Errorf("status %d: %v", status, out)
		}
	})
}

// callsAlways is a provider whose every answer calls get_weather.
type callsAlways struct{ calls atomic.Int32 }

func (c *callsAlways) Name() string { return "calls" }

func (c *callsAlways) Sample(context.Context, *sampler.Request) (*sampler.Response, error) {
	n := c.calls.Add(1)
	return &sampler.Response{Model: "m", StopReason: sampler.StopToolUse, Content: []sampler.Content{
		{Type: sampler.BlockToolUse, ID: fmt.Sprintf("c%d", n), Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}}, nil
}

// TestToolChoiceNoneExhausted checks the problem of a model that keeps
// calling tools when toolChoice is none: a 422 naming method sample, on
// /v1/sample and /v1/messages alike.
func TestToolChoiceNoneExhausted(t *testing.T) {
	const weather = `{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}}`
	for _, tt := range []struct{ path, body string }{
		{"/v1/sample", `{"prompt":"weather?","model":"calls/m","tools":[` + weather + `],"toolChoice":{"mode":"none"}}`},
		{"/v1/messages", `{"maxTokens":20,"modelPreferences":{"hints":[{"name":"calls"}]},"messages":[{"role":"user","content":{"type":"text","text":"weather?"}}],"tools":[` + weather + `],"toolChoice":{"mode":"none"}}`},
	} {
		t.Run(tt.path, func(t *testing.T) {
			p := &callsAlways{}
			s := startStack(t, 0, p)
			status, _, out := s.post(t, tt.path, tt.body)
			if status != 422 || out["method"] != sampler.MethodSample || out["attempts"] != float64(3) || !strings.HasSuffix(out["type"].(string), "/sample-validation-error") {
				t.Fatalf("status %d: %v", status, out)
			}
			if p.calls.Load() != 3 {
				t.Errorf("provider called %d times, want 3", p.calls.Load())
			}
		})
	}
}

// twoTexts is a provider whose answers hold two text blocks.
type twoTexts struct{}

func (twoTexts) Name() string { return "two" }

func (twoTexts) Sample(context.Context, *sampler.Request) (*sampler.Response, error) {
	return &sampler.Response{Model: "m", StopReason: sampler.StopEndTurn,
		Content: []sampler.Content{sampler.TextBlock("Paris."), sampler.TextBlock("It is sunny.")}}, nil
}

// TestMessagesContentShape checks the result's content: one block without
// tools in the request (the texts joined), the blocks as they are with
// tools; both valid CreateMessageResults.
func TestMessagesContentShape(t *testing.T) {
	v, err := mcpschema.Load("../../reference/mcp/schema-2025-11-25.json")
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, 0, twoTexts{})
	const (
		msgs    = `"maxTokens":20,"modelPreferences":{"hints":[{"name":"two/"}]},"messages":[{"role":"user","content":{"type":"text","text":"?"}}]`
		weather = `{"name":"get_weather","inputSchema":{"type":"object"}}`
	)
	for _, tt := range []struct {
		name, body, want string
	}{
		{"without tools", `{` + msgs + `}`, `{"type":"text","text":"Paris.\nIt is sunny."}`},
		{"with tools", `{` + msgs + `,"tools":[` + weather + `]}`, `[{"type":"text","text":"Paris."},{"type":"text","text":"It is sunny."}]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(s.url+"/v1/messages", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			if err := v.Validate("CreateMessageResult", raw); err != nil {
				t.Errorf("%v\n%s", err, raw)
			}
			var out struct {
				Content json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatal(err)
			}
			if string(out.Content) != tt.want {
				t.Errorf("content %s, want %s", out.Content, tt.want)
			}
		})
	}
}

// TestMessagesMatchTheSchema sends params that break the 2025-11-25 schema
// in the places the hand-written checks used to pass or misplace (issue 27,
// point 14): each is refused with a 400, JSON-RPC's invalid-params code and
// an error at the bad member itself, in sampled's words, never Go's. The
// schema itself confirms that each body is invalid, and that the bodies
// at its edges are valid and answered.
func TestMessagesMatchTheSchema(t *testing.T) {
	v, err := mcpschema.Load("../../reference/mcp/schema-2025-11-25.json")
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, 0)
	const (
		okUse  = `{"type":"tool_use","id":"c1","name":"get_weather","input":{}}`
		header = `{"maxTokens":20,`
	)
	text := func(annotations string) string {
		return `{"role":"user","content":{"type":"text","text":"a","annotations":` + annotations + `}}`
	}
	// withResult is a conversation whose last message answers okUse with
	// block.
	withResult := func(block string) string {
		return `"messages":[{"role":"user","content":{"type":"text","text":"w?"}},{"role":"assistant","content":[` + okUse +
			`]},{"role":"user","content":[` + block + `]}],"tools":[{"name":"get_weather","inputSchema":{"type":"object"}}]}`
	}
	msgs := func(m string) string { return header + `"messages":[` + m + `]}` }
	user := `{"role":"user","content":{"type":"text","text":"a"}}`
	tests := []struct {
		name, body, wantPath string
	}{
		{"priority above 1", msgs(text(`{"priority":1.5}`)), "/messages/0/content/annotations/priority"},
		{"priority below 0", msgs(text(`{"priority":-0.1}`)), "/messages/0/content/annotations/priority"},
		{"priority a string", msgs(text(`{"priority":"high"}`)), "/messages/0/content/annotations/priority"},
		{"audience system", msgs(text(`{"audience":["user","system"]}`)), "/messages/0/content/annotations/audience/1"},
		{"audience a string", msgs(text(`{"audience":"user"}`)), "/messages/0/content/annotations/audience"},
		{"lastModified a number", msgs(text(`{"lastModified":5}`)), "/messages/0/content/annotations/lastModified"},
		{"priority in an array of blocks", msgs(`{"role":"user","content":[{"type":"text","text":"a","annotations":{"priority":2}}]}`),
			"/messages/0/content/0/annotations/priority"},
		{"priority inside a tool result", header + withResult(`{"type":"tool_result","toolUseId":"c1","content":[{"type":"text","text":"x","annotations":{"priority":2}}]}`),
			"/messages/2/content/0/content/0/annotations/priority"},
		{"text a number", msgs(`{"role":"user","content":{"type":"text","text":5}}`), "/messages/0/content/text"},
		{"text a number in an array", msgs(`{"role":"user","content":[{"type":"text","text":5}]}`), "/messages/0/content/0/text"},
		{"type a number", msgs(`{"role":"user","content":[{"type":5,"text":"a"}]}`), "/messages/0/content/0/type"},
		{"mimeType a number", msgs(`{"role":"user","content":{"type":"image","data":"AA==","mimeType":5}}`), "/messages/0/content/mimeType"},
		{"isError a string", header + withResult(`{"type":"tool_result","toolUseId":"c1","content":[],"isError":"yes"}`),
			"/messages/2/content/0/isError"},
		{"text a number inside a tool result", header + withResult(`{"type":"tool_result","toolUseId":"c1","content":[{"type":"text","text":5}]}`),
			"/messages/2/content/0/content/0/text"},
		{"stop sequence a number", header + `"stopSequences":["x",1],"messages":[` + user + `]}`, "/stopSequences/1"},
		{"hint name a number", header + `"modelPreferences":{"hints":[{"name":"a"},{"name":1}]},"messages":[` + user + `]}`,
			"/modelPreferences/hints/1/name"},
		{"hints a string", header + `"modelPreferences":{"hints":"x"},"messages":[` + user + `]}`, "/modelPreferences/hints"},
		{"task ttl a string", header + `"task":{"ttl":"1h"},"messages":[` + user + `]}`, "/task/ttl"},
		{"progressToken an object", header + `"_meta":{"progressToken":{}},"messages":[` + user + `]}`, "/_meta/progressToken"},
		{"tool annotations a number", header + `"tools":[{"name":"t","inputSchema":{"type":"object"},"annotations":5}],"messages":[` + user + `]}`,
			"/tools/0/annotations"},
		{"tool icons an object", header + `"tools":[{"name":"t","inputSchema":{"type":"object"},"icons":{}}],"messages":[` + user + `]}`,
			"/tools/0/icons"},
		{"tool outputSchema an array", header + `"tools":[{"name":"t","inputSchema":{"type":"object"},"outputSchema":[]}],"messages":[` + user + `]}`,
			"/tools/0/outputSchema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := v.Validate("CreateMessageRequestParams", []byte(tt.body)); err == nil {
				t.Fatalf("the schema takes %s", tt.body)
			}
			status, _, out := s.post(t, "/v1/messages", tt.body)
			if status != 400 || out["code"] != float64(invalidParams) {
				t.Fatalf("status %d: %v, want 400 with code %d", status, out, invalidParams)
			}
			if paths := errorPaths(out); !contains(paths, tt.wantPath) {
				t.Errorf("error paths %v do not name %s (%v)", paths, tt.wantPath, out["detail"])
			}
			words, _ := json.Marshal(out)
			for _, goText := range []string{"json:", "Go value", "unmarshal"} {
				if bytes.Contains(words, []byte(goText)) {
					t.Errorf("the problem speaks Go (%q): %s", goText, words)
				}
			}
		})
	}
	for _, body := range []string{
		msgs(text(`{"priority":0,"audience":["user","assistant"],"lastModified":"2025-01-12T15:00:58Z"}`)),
		msgs(text(`{"priority":1,"audience":[]}`)),
		header + `"stopSequences":["x"],"modelPreferences":{"hints":[{"name":"offline"}]},"task":{"ttl":60},"_meta":{"progressToken":"p"},"messages":[` + user + `]}`,
	} {
		if err := v.Validate("CreateMessageRequestParams", []byte(body)); err != nil {
			t.Fatalf("the schema refuses %s: %v", body, err)
		}
		if status, _, out := s.post(t, "/v1/messages", body); status != 200 {
			t.Errorf("%s: status %d: %v", body, status, out)
		}
	}
}
