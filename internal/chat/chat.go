// Package chat holds the wire types of OpenAI's Chat Completions API, as
// reference/openai/openapi.yaml describes them: requests, answers, stream
// chunks, errors and the model list. They are defined once for both sides
// of sampled: the openai adapter sends requests and reads answers with
// them, and the /openai/v1 facade reads requests and writes answers.
//
// The types hold the members sampled sends, reads or accepts; a request
// decoded with DisallowUnknownFields names any other member, so that the
// facade refuses what it does not support instead of dropping it.
package chat

import (
	"bytes"
	"encoding/json"
	"reflect"
	"unicode/utf8"
)

// Roles of messages.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Part types, tool and response-format types, and object names.
const (
	PartText       = "text"
	PartImageURL   = "image_url"
	PartInputAudio = "input_audio"

	TypeFunction = "function"

	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"

	ObjectCompletion = "chat.completion"
	ObjectChunk      = "chat.completion.chunk"
	ObjectList       = "list"
	ObjectModel      = "model"
)

// Tool choices given as a string.
const (
	ChoiceNone     = "none"
	ChoiceAuto     = "auto"
	ChoiceRequired = "required"
)

// Finish reasons.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
	FinishFunctionCall  = "function_call"
)

// Request is the body of POST /chat/completions.
type Request struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	// MaxTokens is the older spelling of MaxCompletionTokens, refused by
	// reasoning models; senders should use MaxCompletionTokens.
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	Stop                Stop              `json:"stop,omitempty"`
	Seed                *int64            `json:"seed,omitempty"`
	User                string            `json:"user,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	N                   *int              `json:"n,omitempty"`
	Tools               []Tool            `json:"tools,omitempty"`
	ToolChoice          *ToolChoice       `json:"tool_choice,omitempty"`
	// ParallelToolCalls false asks for at most one tool call; nil means
	// the API's default, true.
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    *ResponseFormat `json:"response_format,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *StreamOptions  `json:"stream_options,omitempty"`
}

// Message is one message of a request.
type Message struct {
	Role string `json:"role"`
	// Content is null only in an assistant message that calls tools.
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Refusal    *string    `json:"refusal,omitempty"`
}

// Content is a message's content: a string, an array of parts, or null
// (neither set).
type Content struct {
	Text  *string
	Parts []Part
}

// Text returns string content.
func Text(s string) Content { return Content{Text: &s} }

// MarshalJSON writes the parts, the string, or null.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	case c.Text != nil:
		return json.Marshal(*c.Text)
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads a string, an array of parts or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	switch {
	case len(b) > 1 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b):
		// The decoder hands over a valid JSON string: without escapes (and
		// with valid UTF-8, which decoding would replace) its text is the
		// bytes between the quotes, read without a second decode.
		s := string(b[1 : len(b)-1])
		c.Text = &s
		return nil
	case len(b) > 0 && b[0] == '[':
		return json.Unmarshal(b, &c.Parts)
	case string(b) == "null":
		return nil
	}
	if len(b) == 0 || b[0] != '"' {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[Content]()}
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	c.Text = &s
	return nil
}

// jsonKind names the kind of a JSON value by its first byte, as
// encoding/json's type errors do.
func jsonKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "object"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	}
	return "number"
}

// String returns the text of the content: the string, or its text parts
// joined.
func (c Content) String() string {
	if c.Text != nil {
		return *c.Text
	}
	var s string
	for _, p := range c.Parts {
		if p.Type == PartText && p.Text != nil {
			s += *p.Text
		}
	}
	return s
}

// Part is one part of a message's content: text, an image or audio.
type Part struct {
	Type       string      `json:"type"`
	Text       *string     `json:"text,omitempty"`
	ImageURL   *ImageURL   `json:"image_url,omitempty"`
	InputAudio *InputAudio `json:"input_audio,omitempty"`
}

// ImageURL is an image_url part's image: a URL, in sampled a data URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// InputAudio is an input_audio part's audio, base64 in a format (wav, mp3).
type InputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// ToolCall is a function call of an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the called function; Arguments is a JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool declares a function the model may call.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is a function's name, description and the JSON Schema of
// its arguments.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolChoice is "none", "auto" or "required" (Mode), or a named function
// (Mode "function" and Function).
type ToolChoice struct {
	Mode     string
	Function string
}

// NamedToolChoice is the object form of ToolChoice, as it is on the wire.
type NamedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// MarshalJSON writes the string, or the named function's object.
func (t ToolChoice) MarshalJSON() ([]byte, error) {
	if t.Mode != TypeFunction {
		return json.Marshal(t.Mode)
	}
	n := NamedToolChoice{Type: TypeFunction}
	n.Function.Name = t.Function
	return json.Marshal(n)
}

// UnmarshalJSON reads a string or a named function's object.
func (t *ToolChoice) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*t = ToolChoice{}
		return json.Unmarshal(b, &t.Mode)
	}
	var n NamedToolChoice
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*t = ToolChoice{Mode: n.Type, Function: n.Function.Name}
	return nil
}

// ResponseFormat asks for text, any JSON object, or JSON that matches a
// schema.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is a json_schema response format's schema.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Stop is the stop member: one string or up to four.
type Stop []string

// UnmarshalJSON reads a string, an array of strings or null.
func (s *Stop) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

// StreamOptions are the options of a streamed request.
type StreamOptions struct {
	// IncludeUsage asks for a last chunk with the usage and no choices.
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// Response is the body of a chat completion.
type Response struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []Choice `json:"choices"`
	Usage             *Usage   `json:"usage,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint,omitempty"`
	// Error is what some compatible servers send, with status 200, in
	// place of choices; sampled never writes it.
	Error json.RawMessage `json:"error,omitempty"`
}

// Choice is one choice of a completion.
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	// Logprobs is always null in what sampled writes.
	Logprobs json.RawMessage `json:"logprobs"`
}

// ResponseMessage is the message of a choice. Content and Refusal are
// required members that may be null.
type ResponseMessage struct {
	Role      string     `json:"role"`
	Content   Content    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Usage counts the tokens of a completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails tells, among others, how many of the prompt's
	// tokens were read from the provider's cache.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails break the prompt's tokens down; sampled reads and
// writes the cached ones only.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Chunk is one event of a streamed completion.
type Chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *Usage        `json:"usage,omitempty"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
}

// ChunkChoice is a choice's fragment in a chunk; FinishReason is null
// until the choice's last chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        ChunkDelta      `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
}

// ChunkDelta is the fragment of a choice's message that a chunk carries.
type ChunkDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Refusal   *string         `json:"refusal,omitempty"`
	ToolCalls []ToolCallChunk `json:"tool_calls,omitempty"`
}

// ToolCallChunk is a fragment of a tool call: the first fragment of a call
// carries its id, type and function name, later ones only pieces of its
// arguments. Index names the call among the message's calls.
type ToolCallChunk struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionChunk `json:"function"`
}

// FunctionChunk is a fragment of a tool call's function.
type FunctionChunk struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ErrorResponse is the body of an error answer.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error is an error answer's error. Param and Code are required members
// that may be null.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ModelList is the body of GET /models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one model of the list.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
