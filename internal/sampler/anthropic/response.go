package anthropic

import (
	"bytes"
	"encoding/json"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/sampled/sampled/internal/sampler"
)

// response maps a Messages API answer. Text and tool_use blocks are kept;
// other blocks (thinking, server tools) are left out. With the
// tool-as-schema trick the answer is one text block holding the JSON input
// of the respond tool.
func response(msg *sdk.Message, t *trick) *sampler.Response {
	resp := &sampler.Response{
		Model:      string(msg.Model),
		StopReason: stopReason(string(msg.StopReason)),
		// Anthropic counts the input written to and read from its cache
		// apart from input_tokens; the domain's input is all of it.
		Usage: sampler.Usage{
			InputTokens:       int(msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens),
			OutputTokens:      int(msg.Usage.OutputTokens),
			CachedInputTokens: int(msg.Usage.CacheReadInputTokens),
		},
		Content: []sampler.Content{},
	}
	if t != nil {
		for _, b := range msg.Content {
			if b.Type == "tool_use" && b.Name == RespondTool {
				resp.Content = []sampler.Content{sampler.TextBlock(answer(b.Input, t.wrapped))}
				if msg.StopReason == sdk.StopReasonToolUse {
					resp.StopReason = sampler.StopEndTurn
				}
				return resp
			}
		}
		// No answer by tool: keep what text there is, for the Service to
		// report as a parse error.
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			resp.Content = append(resp.Content, sampler.TextBlock(b.Text))
		case "tool_use":
			resp.Content = append(resp.Content, sampler.Content{Type: sampler.BlockToolUse, ID: b.ID, Name: b.Name, Input: compact(b.Input)})
		}
	}
	return resp
}

// answer returns the JSON text of the respond tool's input, unwrapping the
// "value" member when the schema was wrapped. An input without it is
// returned whole, so that validation names what is wrong.
func answer(input json.RawMessage, wrapped bool) string {
	if wrapped {
		var w map[string]json.RawMessage
		if json.Unmarshal(input, &w) == nil {
			if v, ok := w["value"]; ok {
				input = v
			}
		}
	}
	return string(compact(input))
}

// compact returns raw without insignificant space; empty input becomes {}
// and invalid JSON is returned as it is.
func compact(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}")
	}
	return sampler.CompactJSON(raw)
}

// stopReason maps Anthropic's stop_reason to MCP's; others (pause_turn,
// model_context_window_exceeded, …) are passed through.
func stopReason(s string) string {
	switch sdk.StopReason(s) {
	case sdk.StopReasonEndTurn:
		return sampler.StopEndTurn
	case sdk.StopReasonMaxTokens:
		return sampler.StopMaxTokens
	case sdk.StopReasonStopSequence:
		return sampler.StopStopSequence
	case sdk.StopReasonToolUse:
		return sampler.StopToolUse
	case sdk.StopReasonRefusal:
		return sampler.StopRefusal
	default:
		return s
	}
}
