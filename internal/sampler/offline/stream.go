package offline

import (
	"context"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sampled/sampled/internal/sampler"
)

var _ sampler.Streamer = (*Provider)(nil)

// The pace of a stream.
const (
	// StreamPause is the pause before each fragment of a stream of the
	// models other than "slow".
	StreamPause = 15 * time.Millisecond
	// SlowStreamPause is the least pause before each fragment of a stream
	// of "slow".
	SlowStreamPause = 150 * time.Millisecond
)

// The size of fragments.
const (
	// fragmentWords is the number of words of a text fragment.
	fragmentWords = 3
	// fragmentBytes is the size of a fragment of JSON text, cut at a rune
	// boundary.
	fragmentBytes = 12
)

// Stream gives the answer Sample gives for req and hands it to emit in
// fragments, a pause before each: StreamPause, or for "slow" SlowDelay
// shared among the fragments, SlowStreamPause at least. Plain text comes a
// few words at a time; JSON text (schema mode) and tool-call arguments a
// few bytes at a time, with the call's id and name on each fragment. It
// returns ctx.Err() as soon as ctx is done, and emits nothing after.
func (p *Provider) Stream(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (*sampler.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	model, err := modelOf(req)
	if err != nil {
		return nil, err
	}
	resp, err := p.answer(ctx, req, model)
	if err != nil {
		return nil, err
	}
	deltas := split(resp.Content, req.Mode() == sampler.ModeSchema)
	gap := pace(model, len(deltas))
	for _, d := range deltas {
		if err := p.pause(ctx, gap); err != nil {
			return nil, err
		}
		emit(d)
	}
	if len(deltas) == 0 && model == ModelSlow {
		if err := p.pause(ctx, SlowDelay); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// pace is the pause before each of the n fragments of a stream of model.
func pace(model string, n int) time.Duration {
	if model != ModelSlow {
		return StreamPause
	}
	return max(SlowDelay/time.Duration(max(n, 1)), SlowStreamPause)
}

// split cuts content into the deltas of its stream: text by words, or by
// bytes when it is JSON, and each tool call's arguments by bytes.
func split(content []sampler.Content, jsonText bool) []sampler.Delta {
	var out []sampler.Delta
	calls := 0
	for _, c := range content {
		switch c.Type {
		case sampler.BlockText:
			pieces := wordPieces(c.Text, fragmentWords)
			if jsonText {
				pieces = bytePieces(c.Text, fragmentBytes)
			}
			for _, s := range pieces {
				out = append(out, sampler.Delta{Text: s})
			}
		case sampler.BlockToolUse:
			pieces := bytePieces(string(c.Input), fragmentBytes)
			if len(pieces) == 0 {
				pieces = []string{""} // the call, without arguments
			}
			for _, s := range pieces {
				out = append(out, sampler.Delta{ToolCall: &sampler.ToolCallDelta{Index: calls, ID: c.ID, Name: c.Name, Arguments: s}})
			}
			calls++
		}
	}
	return out
}

// wordPieces cuts s into pieces of n words each, the space after a word
// staying with it; the pieces join to s.
func wordPieces(s string, n int) []string {
	var out []string
	start, words, inWord := 0, 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			if words == n {
				out = append(out, s[start:i])
				start, words = i, 0
			}
			words++
		}
		inWord = !space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// bytePieces cuts s into pieces of n bytes, a few more where a rune would
// be cut; the pieces join to s.
func bytePieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}
