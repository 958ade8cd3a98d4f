// Package offline is sampled's deterministic offline provider, the default
// provider of the service: it needs no key and no network. The same request
// always gives the same response. Plain requests get a visibly synthetic
// echo of the last user text, schema requests a value generated to satisfy
// the schema, tools requests a call of the tool the prompt names, with
// arguments valid against its input schema whose strings come from the
// user's text (never from the schema's examples, which answer another
// question): the arithmetic of "calculate 2 * (3 + 4)" for an expression,
// the whole text for a text or query, a proper name for a city. Generated values are checked
// with the compiled schemas of sampler.SchemaCache, the validator the
// service itself uses.
//
// Besides "default" it serves two fault models that exercise the retries
// of guaranteed helpers: "flaky" breaks the first attempt of every request
// (malformed JSON in schema mode, no tool call in tools mode) and "broken"
// breaks every attempt. Flaky tells a first attempt from the conversation:
// a retry carries flaky's broken answer followed by a corrective user turn.
// A fourth model, "slow", answers as "default" does after SlowDelay, so
// that a loop runs long enough to be watched and cancelled.
//
// Stream gives the answer Sample gives, in fragments as a model's stream
// would carry it: text a few words at a time, JSON text and tool-call
// arguments a few bytes at a time, StreamPause apart. "slow" spreads
// SlowDelay over its fragments, at least SlowStreamPause apart, so that a
// client sees them arrive one by one.
package offline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/sampler"
)

// Model names of the offline provider.
const (
	ModelDefault = "default"
	ModelFlaky   = "flaky"
	ModelBroken  = "broken"
	ModelSlow    = "slow"
)

// SlowDelay is how long each call of the "slow" model takes.
const SlowDelay = 2 * time.Second

// maxQuote bounds, in runes, the user text and tool results quoted in
// answers.
const maxQuote = 200

// Provider is the offline provider. Create it with New.
type Provider struct {
	schemas *sampler.SchemaCache
	// after is the clock the slow model and the pauses of a stream wait
	// on (time.After).
	after func(time.Duration) <-chan time.Time
}

var _ sampler.Provider = (*Provider)(nil)

// New returns an offline provider that compiles schemas with schemas,
// ideally the cache of the service that validates its answers; nil means a
// cache of its own.
func New(schemas *sampler.SchemaCache) *Provider {
	if schemas == nil {
		schemas = sampler.NewSchemaCache(0)
	}
	return &Provider{schemas: schemas, after: time.After}
}

// Name returns "offline".
func (p *Provider) Name() string { return "offline" }

// Models returns the models the provider serves: "default", "flaky",
// "broken" and "slow".
func (p *Provider) Models() []string {
	return []string{ModelDefault, ModelFlaky, ModelBroken, ModelSlow}
}

// Sample answers req deterministically. An empty model is "default"; an
// unknown one is an error. "slow" first waits SlowDelay. It returns
// ctx.Err() as soon as ctx is done, during that wait too.
func (p *Provider) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	model, err := modelOf(req)
	if err != nil {
		return nil, err
	}
	if model == ModelSlow {
		if err := p.pause(ctx, SlowDelay); err != nil {
			return nil, err
		}
	}
	return p.answer(ctx, req, model)
}

// modelOf returns the model req asks for: "default" when it names none, an
// error when it names one the provider does not serve.
func modelOf(req *sampler.Request) (string, error) {
	model := cmp.Or(req.Model, ModelDefault)
	switch model {
	case ModelDefault, ModelFlaky, ModelBroken, ModelSlow:
		return model, nil
	default:
		return "", fmt.Errorf("offline: unknown model %q", model)
	}
}

// pause waits d on the provider's clock, or until ctx is done, when it
// returns ctx.Err(); a done ctx wins over a clock that has fired too.
func (p *Provider) pause(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-p.after(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer is model's answer to req, at once.
func (p *Provider) answer(ctx context.Context, req *sampler.Request, model string) (*sampler.Response, error) {
	var (
		content []sampler.Content
		stop    string
		err     error
	)
	switch req.Mode() {
	case sampler.ModeSchema:
		content, stop, err = p.schemaAnswer(ctx, req, model)
	case sampler.ModeTools:
		content, stop, err = p.toolsAnswer(ctx, req, model)
	default:
		content, stop = textAnswer(req)
	}
	if err != nil {
		return nil, err
	}
	return &sampler.Response{
		Model:      model,
		Content:    content,
		StopReason: stop,
		Usage:      sampler.Usage{InputTokens: requestTokens(req), OutputTokens: max(blockWords(content), 1)},
	}, nil
}

// textAnswer is the plain-mode answer, cut to MaxTokens words.
func textAnswer(req *sampler.Request) ([]sampler.Content, string) {
	text := replyText(req)
	stop := sampler.StopEndTurn
	if words := strings.Fields(text); req.MaxTokens > 0 && len(words) > req.MaxTokens {
		text = strings.Join(words[:req.MaxTokens], " ")
		stop = sampler.StopMaxTokens
	}
	return []sampler.Content{sampler.TextBlock(text)}, stop
}

// replyText echoes the last user message, or quotes the tool results it
// carries.
func replyText(req *sampler.Request) string {
	i := lastUserIndex(req.Messages)
	if i < 0 {
		return "[offline] There is no user message to answer."
	}
	msg := req.Messages[i]
	if results := toolResults(msg); len(results) > 0 {
		return toolResultsText(req.Messages[:i], results)
	}
	text := strings.TrimSpace(sampler.TextOf(msg.Content))
	if text == "" {
		var kinds []string
		for _, c := range msg.Content {
			if !slices.Contains(kinds, c.Type) {
				kinds = append(kinds, c.Type)
			}
		}
		if len(kinds) == 0 {
			return "[offline] You sent an empty message."
		}
		return "[offline] You sent no text, only " + strings.Join(kinds, ", ") + " content."
	}
	return `[offline] You said: "` + quoteClip(text) + `"`
}

// quoteClip cuts s to maxQuote runes, marking the cut with an ellipsis.
func quoteClip(s string) string {
	if c := clipRunes(s, maxQuote); c != s {
		return c + "…"
	}
	return s
}

// lastUserIndex returns the index of the last user message, or -1.
func lastUserIndex(msgs []sampler.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == sampler.RoleUser {
			return i
		}
	}
	return -1
}

// toolResults returns the tool_result blocks of m.
func toolResults(m sampler.Message) []sampler.Content {
	return slices.DeleteFunc(slices.Clone(m.Content), func(c sampler.Content) bool { return c.Type != sampler.BlockToolResult })
}

// firstText returns the text of the first user message with text that
// msgs yields: slices.Backward(m) gives the newest one, which drives tool
// choice and generated strings; slices.All(m) the task, which stays the
// same when corrective turns follow and seeds schema answers.
func firstText(msgs iter.Seq2[int, sampler.Message]) string {
	for _, m := range msgs {
		if t := strings.TrimSpace(sampler.TextOf(m.Content)); m.Role == sampler.RoleUser && t != "" {
			return t
		}
	}
	return ""
}

// toolResultsText quotes each result with the name of the tool whose call
// it answers, found among the tool_use blocks of prev.
func toolResultsText(prev []sampler.Message, results []sampler.Content) string {
	parts := make([]string, 0, len(results))
	for _, r := range results {
		body := cmp.Or(sampler.TextOf(r.Content), string(sampler.CompactJSON(r.StructuredContent)))
		part := toolNameFor(prev, r.ToolUseID) + " → "
		if r.IsError != nil && *r.IsError {
			part += "error "
		}
		parts = append(parts, part+strconv.Quote(quoteClip(body)))
	}
	return "[offline] Tool results: " + strings.Join(parts, "; ")
}

// toolNameFor returns the name of the tool called with id, searching the
// newest messages first; it falls back to the id itself.
func toolNameFor(prev []sampler.Message, id string) string {
	for _, m := range slices.Backward(prev) {
		for _, c := range m.Content {
			if c.Type == sampler.BlockToolUse && c.ID == id && c.Name != "" {
				return c.Name
			}
		}
	}
	return cmp.Or(id, "tool")
}

// schemaAnswer is the schema-mode answer: the compact JSON of a value
// generated from the schema, malformed when the model breaks it.
func (p *Provider) schemaAnswer(ctx context.Context, req *sampler.Request, model string) ([]sampler.Content, string, error) {
	compiled, err := p.schemas.Compile(req.Schema, "/schema")
	if err != nil {
		return nil, "", fmt.Errorf("offline: schema: %w", err)
	}
	raw, _, err := generate(ctx, compiled, req.Schema, firstText(slices.All(req.Messages)), false)
	if errors.Is(err, ErrTooLarge) {
		return nil, "", sampler.Invalid("/schema", "%s", err.Error())
	}
	if err != nil {
		return nil, "", err
	}
	text := string(raw)
	broken := breakJSON(text)
	retry := -1
	if model == ModelFlaky {
		retry = corrected(req.Messages, func(int) string { return broken })
	}
	if breaks(model, retry) {
		text = broken
	}
	return []sampler.Content{sampler.TextBlock(text)}, sampler.StopEndTurn, nil
}

// breaks reports whether model gives its broken answer: "broken" always,
// "flaky" on the first attempt, when the conversation holds no corrected
// broken answer (retry < 0, see corrected).
func breaks(model string, retry int) bool {
	return model == ModelBroken || model == ModelFlaky && retry < 0
}

// corrected returns the index of the first assistant turn of msgs that is
// the broken answer to the messages before it (brokenAt(i)) and that a user
// turn follows, as a guaranteed helper sends its correction; else -1.
func corrected(msgs []sampler.Message, brokenAt func(i int) string) int {
	for i := 0; i+1 < len(msgs); i++ {
		m := msgs[i]
		if m.Role == sampler.RoleAssistant && msgs[i+1].Role == sampler.RoleUser &&
			len(sampler.ToolCallsOf(m.Content)) == 0 && sampler.TextOf(m.Content) == brokenAt(i) {
			return i
		}
	}
	return -1
}

// breakJSON returns text that is not valid JSON: a container or string cut
// before its last character, any other value behind an unfinished member.
func breakJSON(s string) string {
	if s != "" && strings.ContainsRune(`{["`, rune(s[0])) {
		return s[:len(s)-1]
	}
	return `{"oops": ` + s
}

// requestTokens roughly counts the words of all text in req, at least 1.
func requestTokens(req *sampler.Request) int {
	n := len(strings.Fields(req.SystemPrompt))
	for _, m := range req.Messages {
		n += blockWords(m.Content)
	}
	return max(n, 1)
}

// blockWords roughly counts the words of content.
func blockWords(content []sampler.Content) int {
	n := 0
	for _, c := range content {
		switch c.Type {
		case sampler.BlockText:
			n += len(strings.Fields(c.Text))
		case sampler.BlockToolUse:
			n += len(strings.Fields(string(c.Input)))
		case sampler.BlockToolResult:
			n += blockWords(c.Content) + len(strings.Fields(string(c.StructuredContent)))
		}
	}
	return n
}
