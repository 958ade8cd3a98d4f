package openai

import (
	"encoding/json"
	"testing"

	"github.com/sampled/sampled/internal/chat"
)

// TestCachedTokens: the prompt tokens OpenAI read from its cache
// (usage.prompt_tokens_details.cached_tokens, as its API reference shows
// them) are the usage's CachedInputTokens, part of its input.
func TestCachedTokens(t *testing.T) {
	const reply = `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hi.","refusal":null},"logprobs":null,"finish_reason":"stop"}],
		"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
		"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
		"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`
	var resp chat.Response
	if err := json.Unmarshal([]byte(reply), &resp); err != nil {
		t.Fatal(err)
	}
	out, err := (&Provider{name: "openai"}).decodeResponse(200, &resp)
	if err != nil {
		t.Fatal(err)
	}
	if u := out.Usage; u.InputTokens != 2006 || u.CachedInputTokens != 1920 || u.OutputTokens != 300 {
		t.Errorf("usage %+v, want 2006 input of which 1920 cached, 300 output", u)
	}
}
