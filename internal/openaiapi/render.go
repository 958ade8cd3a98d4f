package openaiapi

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

// Meta identifies an answer: its id ("chatcmpl-" and random hex) and its
// creation time in Unix seconds, the same in every chunk of a stream.
type Meta struct {
	ID      string
	Created int64
}

// NewMeta returns the Meta of an answer made at now.
func NewMeta(now time.Time) Meta {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail
	return Meta{ID: "chatcmpl-" + hex.EncodeToString(b[:]), Created: now.Unix()}
}

// Completion renders a result as a chat completion: one choice whose
// message holds the text (null when the answer only calls tools) and the
// tool calls, arguments as JSON text; model is the configured model that
// answered ("offline/default"), and the usage counts every attempt.
func Completion(m Meta, res *sampler.Result) chat.Response {
	msg := chat.ResponseMessage{Role: chat.RoleAssistant, Content: chat.Text(res.Text)}
	for _, tc := range sampler.ToolCallsOf(res.Content) {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall(tc))
	}
	if res.Text == "" && len(msg.ToolCalls) > 0 {
		msg.Content = chat.Content{}
	}
	return chat.Response{ID: m.ID, Object: chat.ObjectCompletion, Created: m.Created, Model: res.ModelID,
		Choices: []chat.Choice{{Message: msg, FinishReason: FinishReason(res)}}, Usage: usage(res.Usage)}
}

func wireToolCall(tc sampler.ToolCall) chat.ToolCall {
	return chat.ToolCall{ID: tc.ID, Type: chat.TypeFunction,
		Function: chat.FunctionCall{Name: tc.Name, Arguments: string(sampler.CompactJSON(tc.Arguments))}}
}

func usage(u sampler.Usage) *chat.Usage {
	out := &chat.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	if u.CachedInputTokens > 0 {
		out.PromptTokensDetails = &chat.PromptTokensDetails{CachedTokens: u.CachedInputTokens}
	}
	return out
}

// FinishReason maps the result's MCP stop reason to OpenAI's: maxTokens is
// length, refusal content_filter; an answer that calls tools ends with
// tool_calls, any other with stop (endTurn, stopSequence, and reasons
// only a provider knows).
func FinishReason(res *sampler.Result) string {
	switch res.StopReason {
	case sampler.StopMaxTokens:
		return chat.FinishLength
	case sampler.StopRefusal:
		return chat.FinishContentFilter
	}
	for _, c := range res.Content {
		if c.Type == sampler.BlockToolUse {
			return chat.FinishToolCalls
		}
	}
	return chat.FinishStop
}

// Chunks renders an answer as chat.completion.chunk values: from its
// deltas as they come (Delta), or whole once it is known (Result), then
// its end (Finish). The first chunk carries the role; the first fragment
// of a tool call carries its index, id, type and function name, the
// others its index and a piece of its arguments. The zero value is not
// ready: set Meta and Model, the configured model expected to answer
// (the chunks of Result and Finish name the one that did, a fallback
// perhaps).
type Chunks struct {
	Meta
	Model string
	// started is set once a chunk carried the role; attempt is the
	// attempt of the last delta and calls the tool calls of that attempt
	// whose first fragment went out.
	started bool
	attempt int
	calls   map[int]bool
}

// chunk returns a chunk of one choice holding delta.
func (c *Chunks) chunk(delta chat.ChunkDelta) chat.Chunk {
	if !c.started {
		c.started = true
		delta.Role = chat.RoleAssistant
	}
	return chat.Chunk{ID: c.ID, Object: chat.ObjectChunk, Created: c.Created, Model: c.Model,
		Choices: []chat.ChunkChoice{{Delta: delta}}}
}

// Delta renders one delta. A delta of a later attempt than the last one
// starts its tool calls over: their first fragments carry id and name
// again.
func (c *Chunks) Delta(d sampler.Delta) []chat.Chunk {
	if d.Attempt != c.attempt || c.calls == nil {
		c.attempt, c.calls = d.Attempt, map[int]bool{}
	}
	if d.ToolCall == nil {
		text := d.Text
		return []chat.Chunk{c.chunk(chat.ChunkDelta{Content: &text})}
	}
	tc := d.ToolCall
	var out []chat.Chunk
	if !c.calls[tc.Index] {
		c.calls[tc.Index] = true
		out = append(out, c.chunk(chat.ChunkDelta{ToolCalls: []chat.ToolCallChunk{{Index: tc.Index, ID: tc.ID, Type: chat.TypeFunction,
			Function: chat.FunctionChunk{Name: tc.Name}}}}))
	}
	if tc.Arguments != "" {
		out = append(out, c.chunk(chat.ChunkDelta{ToolCalls: []chat.ToolCallChunk{{Index: tc.Index,
			Function: chat.FunctionChunk{Arguments: tc.Arguments}}}}))
	}
	return out
}

// Result renders a whole answer as the chunks of its text and its tool
// calls, naming the model that answered: for an answer that was checked
// before any of it was sent.
func (c *Chunks) Result(res *sampler.Result) []chat.Chunk {
	c.Model = res.ModelID
	var out []chat.Chunk
	calls := sampler.ToolCallsOf(res.Content)
	if res.Text != "" || len(calls) == 0 {
		out = append(out, c.Delta(sampler.Delta{Attempt: res.Attempts, Text: res.Text})...)
	}
	for i, tc := range calls {
		out = append(out, c.Delta(sampler.Delta{Attempt: res.Attempts, ToolCall: &sampler.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name,
			Arguments: string(sampler.CompactJSON(tc.Arguments))}})...)
	}
	return out
}

// Finish renders the end of an answer: the chunk with its finish_reason,
// and, with usage set, one with the usage of every attempt and no choice.
// Both name the model that answered.
func (c *Chunks) Finish(res *sampler.Result, withUsage bool) []chat.Chunk {
	c.Model = res.ModelID
	finish := FinishReason(res)
	last := c.chunk(chat.ChunkDelta{})
	last.Choices[0].FinishReason = &finish
	out := []chat.Chunk{last}
	if withUsage {
		out = append(out, chat.Chunk{ID: c.ID, Object: chat.ObjectChunk, Created: c.Created, Model: c.Model,
			Choices: []chat.ChunkChoice{}, Usage: usage(res.Usage)})
	}
	return out
}

// Models renders the configured models as OpenAI's model list: each by
// its ID ("offline/default"), owned by its provider.
func Models(models []sampler.Model) chat.ModelList {
	out := chat.ModelList{Object: chat.ObjectList, Data: []chat.Model{}}
	for _, m := range models {
		out.Data = append(out.Data, chat.Model{ID: m.ID(), Object: chat.ObjectModel, OwnedBy: m.Provider})
	}
	return out
}
