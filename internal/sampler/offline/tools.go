package offline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sampled/sampled/internal/sampler"
)

// toolsAnswer is the tools-mode answer: one tool_use block, or a text
// answer when the tool choice, the prompt or the model's fault says so.
func (p *Provider) toolsAnswer(ctx context.Context, req *sampler.Request, model string) ([]sampler.Content, string, error) {
	// The broken answer is the text answer, without a tool call.
	brokenAt := func(i int) string {
		prior := *req
		prior.Messages = req.Messages[:i]
		content, _ := textAnswer(&prior)
		return sampler.TextOf(content)
	}
	retry := -1
	if model == ModelFlaky {
		retry = corrected(req.Messages, brokenAt)
	}
	seed := firstText(slices.Backward(req.Messages))
	if retry >= 0 {
		seed = firstText(slices.Backward(req.Messages[:retry])) // the correction is not the task
	}
	last := lastUserIndex(req.Messages)
	afterResults := last >= 0 && len(toolResults(req.Messages[last])) > 0
	var tool *sampler.Tool
	switch mode := req.ToolChoice.EffectiveMode(); mode {
	case sampler.ToolChoiceNone:
	case sampler.ToolChoiceTool:
		i := slices.IndexFunc(req.Tools, func(t sampler.Tool) bool { return t.Name == req.ToolChoice.Name })
		if i < 0 {
			return nil, "", fmt.Errorf("offline: tool %q is not among the request's tools", req.ToolChoice.Name)
		}
		tool = &req.Tools[i]
	case sampler.ToolChoiceRequired:
		tool = bestTool(req.Tools, seed)
		if tool == nil {
			tool = &req.Tools[0]
		}
	case sampler.ToolChoiceAuto:
		if !afterResults {
			tool = bestTool(req.Tools, seed)
		}
	default:
		return nil, "", fmt.Errorf("offline: unknown tool choice mode %q", mode)
	}
	if tool == nil || breaks(model, retry) {
		content, stop := textAnswer(req)
		return content, stop, nil
	}
	schema := tool.InputSchema
	if s := string(bytes.TrimSpace(schema)); s == "" || s == "null" {
		schema = []byte(`{"type":"object"}`)
	}
	compiled, err := p.schemas.Compile(schema, "/tools")
	if err != nil {
		return nil, "", fmt.Errorf("offline: tool %q: %w", tool.Name, err)
	}
	input, _, err := generate(ctx, compiled, schema, seed, true)
	if errors.Is(err, ErrTooLarge) {
		return nil, "", sampler.Invalid("/tools", "tool %q: %s", tool.Name, err.Error())
	}
	if err != nil {
		return nil, "", fmt.Errorf("offline: tool %q: %w", tool.Name, err)
	}
	return []sampler.Content{{
		Type:  sampler.BlockToolUse,
		ID:    callID(req, tool.Name, input),
		Name:  tool.Name,
		Input: input,
	}}, sampler.StopToolUse, nil
}

// callID derives a tool call id from the conversation and the call.
func callID(req *sampler.Request, name string, input []byte) string {
	h := fnv.New32a()
	for _, m := range req.Messages {
		b, _ := m.MarshalJSON()
		h.Write(b)
		h.Write([]byte{0})
	}
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(input)
	return fmt.Sprintf("call_%08x", h.Sum32())
}

// bestTool returns the tool whose name and description share the most
// words with text (a name word counts thrice), or nil when none shares any.
// Ties go to the earlier tool.
func bestTool(tools []sampler.Tool, text string) *sampler.Tool {
	said := map[string]bool{}
	for _, w := range matchWords(text) {
		said[w] = true
	}
	var best *sampler.Tool
	bestScore := 0
	for i, t := range tools {
		score, counted := 0, map[string]bool{}
		name := matchWords(t.Name + " " + t.Title)
		for j, w := range append(name, matchWords(t.Description)...) {
			if said[w] && !counted[w] {
				counted[w] = true
				score++
				if j < len(name) {
					score += 2 // a name word counts thrice
				}
			}
		}
		if score > bestScore {
			best, bestScore = &tools[i], score
		}
	}
	return best
}

// matchWords splits s into lower-case words for matching: on anything but
// letters and digits and at camelCase humps ("getWeather" is get, weather;
// "HTTPServer" is http, server), leaving out words shorter than 3 letters
// and stop words, with a plural "s" dropped.
func matchWords(s string) []string {
	var out []string
	add := func(w string) {
		if w = strings.ToLower(w); utf8.RuneCountInString(w) >= 3 && !isStopWord(w) {
			if len(w) > 4 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
				w = w[:len(w)-1]
			}
			out = append(out, w)
		}
	}
	for _, field := range strings.FieldsFunc(s, notAlnum) {
		rs := []rune(field)
		start := 0
		for i := 1; i < len(rs); i++ {
			lowerToUpper := unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i])
			acronymEnd := unicode.IsUpper(rs[i-1]) && unicode.IsUpper(rs[i]) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if lowerToUpper || acronymEnd {
				add(string(rs[start:i]))
				start = i
			}
		}
		add(string(rs[start:]))
	}
	return out
}
