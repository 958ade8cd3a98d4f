package handlers

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/access"
)

// openaiJS holds the official openai npm package, installed by
// `npm ci --prefix internal/handlers/testdata/openai-js`.
const openaiJS = "testdata/openai-js"

// TestOpenAINodeSDK runs the official openai npm package against
// /openai/v1 (testdata/openai-js/check.mjs): chat with and without
// streaming, tools, a json_schema answer retried on offline/flaky, the 422
// when the attempts run out, errors and the model list.
func TestOpenAINodeSDK(t *testing.T) {
	dir, err := filepath.Abs(openaiJS)
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	default:
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
			missing = "run npm ci --prefix internal/handlers/testdata/openai-js"
		}
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the openai npm package is required in CI: %s", missing)
		}
		t.Skipf("the openai npm package is missing: %s", missing)
	}
	st := startAccessStack(t, access.Options{}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "check.mjs"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "BASE_URL=" + st.url + "/openai/v1", "API_KEY=" + keyAlice}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, stderr.String())
	}
	type apiError struct {
		Status      int
		Type, Code  string
		Param, Name string
		Message     string
	}
	type toolCall struct{ ID, Name, Arguments string }
	type streamed struct {
		Content   string
		Chunks    int
		Finish    string
		Usage     *struct{ Total_tokens int }
		ToolCalls []toolCall
	}
	var out struct {
		Chat struct {
			Object, Content, Finish string
			Usage                   struct{ Total_tokens int }
		}
		Stream streamed
		Tools  struct {
			Finish    string
			ToolCalls []toolCall
		}
		ToolsStream streamed
		Schema      struct {
			Content, Attempts string
			Usage             struct{ Prompt_tokens int }
		}
		SchemaStream                           streamed
		Exhausted, UnknownMember, UnknownModel apiError
		BadKey                                 apiError
		Models                                 []struct{ ID, Object, Owned_by string }
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("check.mjs printed %v: %s", err, raw)
	}
	if out.Chat.Object != "chat.completion" || out.Chat.Content == "" || out.Chat.Finish != "stop" || out.Chat.Usage.Total_tokens == 0 {
		t.Errorf("chat: %+v", out.Chat)
	}
	if out.Stream.Content == "" || out.Stream.Chunks < 3 || out.Stream.Finish != "stop" || out.Stream.Usage == nil {
		t.Errorf("streamed chat: %+v; want several chunks, finish stop and the usage chunk", out.Stream)
	}
	for name, calls := range map[string][]toolCall{"tools": out.Tools.ToolCalls, "streamed tools": out.ToolsStream.ToolCalls} {
		var args struct{ City string }
		if len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].ID == "" || json.Unmarshal([]byte(calls[0].Arguments), &args) != nil || args.City == "" {
			t.Errorf("%s: calls %+v; want one get_weather call with a city", name, calls)
		}
	}
	if out.Tools.Finish != "tool_calls" || out.ToolsStream.Finish != "tool_calls" {
		t.Errorf("tools finish %q, streamed %q; want tool_calls", out.Tools.Finish, out.ToolsStream.Finish)
	}
	for name, content := range map[string]string{"json_schema": out.Schema.Content, "streamed json_schema": out.SchemaStream.Content} {
		var p struct{ Name *string }
		if err := json.Unmarshal([]byte(content), &p); err != nil || p.Name == nil {
			t.Errorf("%s on offline/flaky: content %q is not the validated person", name, content)
		}
	}
	if out.Schema.Attempts != "2" {
		t.Errorf("Sampled-Attempts %q; want 2 (offline/flaky's first answer is broken)", out.Schema.Attempts)
	}
	if e := out.Exhausted; e.Status != 422 || e.Code != "validation_failed" {
		t.Errorf("attempts run out: %+v; want 422 validation_failed", e)
	}
	if e := out.UnknownMember; e.Status != 400 || e.Param != "logprobs" || e.Name != "BadRequestError" {
		t.Errorf("unknown member: %+v; want a 400 naming logprobs", e)
	}
	if e := out.UnknownModel; e.Status != 400 || e.Param != "model" {
		t.Errorf("unknown model: %+v; want a 400 naming model", e)
	}
	if e := out.BadKey; e.Status != 401 || e.Name != "AuthenticationError" {
		t.Errorf("bad key: %+v; want a 401", e)
	}
	if !slices.ContainsFunc(out.Models, func(m struct{ ID, Object, Owned_by string }) bool {
		return m.ID == "offline/default" && m.Object == "model" && m.Owned_by == "offline"
	}) {
		t.Errorf("models %+v; want offline/default owned by offline", out.Models)
	}
}
