package anthropic

import (
	"encoding/json"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
)

// TestCacheUsage: Anthropic counts the input written to and read from its
// prompt cache apart from input_tokens; the domain's input is all of it,
// and the cache reads are its cached input.
func TestCacheUsage(t *testing.T) {
	const reply = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5",
		"content":[{"type":"text","text":"Hi."}],"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":21,"cache_creation_input_tokens":188,"cache_read_input_tokens":1500,"output_tokens":393}}`
	var msg sdk.Message
	if err := json.Unmarshal([]byte(reply), &msg); err != nil {
		t.Fatal(err)
	}
	if u := response(&msg, nil).Usage; u.InputTokens != 21+188+1500 || u.CachedInputTokens != 1500 || u.OutputTokens != 393 {
		t.Errorf("usage %+v, want 1709 input of which 1500 cached, 393 output", u)
	}
}
