package openaiapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

// Call is a request converted for the domain, with what answering it
// needs: how to stream, and the way back from the domain's paths to the
// request's.
type Call struct {
	Params *sampler.Params
	// Stream asks for the answer as chunks; IncludeUsage for a last chunk
	// with the usage; RawStream for every attempt live (see Extension).
	Stream, IncludeUsage, RawStream bool

	// msgs is the origin of each domain message in the request.
	msgs []origin
	// maxTokens and schema are the request's members that became
	// MaxTokens and Schema.
	maxTokens, schema string
}

// Guaranteed reports whether the answer is checked, and corrected when it
// fails: a JSON response_format (schema mode) or tools.
func (c *Call) Guaranteed() bool { return c.Params.Mode() != sampler.ModePlain }

// origin is where a domain message came from: the request's message at
// msg (the first of them, for the tool results of several tool messages),
// and each of its blocks.
type origin struct {
	msg    string
	blocks []blockOrigin
}

// blockOrigin is where a domain block came from: the value at path, whose
// members are renamed (the block's "/input" is the call's
// "/function/arguments").
type blockOrigin struct {
	path   string
	rename map[string]string
}

// Renames of block members, from the domain's to the request's.
var (
	textString = map[string]string{"/text": ""}
	imageURL   = map[string]string{"/data": "/image_url/url", "/mimeType": "/image_url/url"}
	inputAudio = map[string]string{"/data": "/input_audio/data", "/mimeType": "/input_audio/format"}
	toolCall   = map[string]string{"/input": "/function/arguments", "/name": "/function/name"}
	toolResult = map[string]string{"/toolUseId": "/tool_call_id"}
)

// anyObject is the schema of a json_object response_format; noParameters
// that of a function declared without parameters, as OpenAI reads one.
var (
	anyObject    = json.RawMessage(`{"type":"object"}`)
	noParameters = json.RawMessage(`{"type":"object","properties":{}}`)
)

// audioFormats are the media types of input_audio's formats;
// choiceStrings the domain's modes of tool_choice's strings.
var (
	audioFormats  = map[string]string{"wav": "audio/wav", "mp3": "audio/mpeg"}
	choiceStrings = map[string]string{chat.ChoiceNone: sampler.ToolChoiceNone, chat.ChoiceAuto: sampler.ToolChoiceAuto,
		chat.ChoiceRequired: sampler.ToolChoiceRequired}
)

// converter gathers the errors of a conversion.
type converter struct {
	errs []sampler.FieldError
}

func (cv *converter) add(path, format string, args ...any) {
	cv.errs = append(cv.errs, sampler.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Call converts the request for the domain; defaultMaxTokens applies when
// it gives no max_completion_tokens (or max_tokens). An error is a
// *sampler.InvalidError naming each offending member by its JSON Pointer
// into the request.
func (r *Request) Call(defaultMaxTokens int) (*Call, error) {
	var cv converter
	c := &Call{Stream: r.Stream, maxTokens: "/max_completion_tokens"}
	p := &sampler.Params{ModelSpec: r.Model}
	p.MaxTokens = defaultMaxTokens
	switch mct, mt := r.MaxCompletionTokens, r.MaxTokens; {
	case mct != nil && mt != nil && *mct != *mt:
		cv.add("/max_tokens", "max_tokens (%d) and max_completion_tokens (%d) differ; give max_completion_tokens only", *mt, *mct)
	case mct != nil:
		p.MaxTokens = *mct
	case mt != nil:
		p.MaxTokens, c.maxTokens = *mt, "/max_tokens"
	}
	p.Temperature = r.Temperature
	if r.TopP != nil && *r.TopP != 1 {
		cv.add("/top_p", "top_p is not supported by sampled: its models sample from the whole distribution (top_p 1); leave it out")
	}
	if r.Seed != nil {
		cv.add("/seed", "seed is not supported by sampled: it cannot make its providers' answers reproducible; leave it out")
	}
	if r.N != nil && *r.N != 1 {
		cv.add("/n", "n must be 1: sampled answers with one choice")
	}
	p.StopSequences = r.Stop
	if r.Metadata != nil {
		p.Metadata, _ = json.Marshal(r.Metadata) // a map of strings encodes
	}
	// r.User is accepted and neither sent on nor recorded.
	if r.StreamOptions != nil && !r.Stream {
		cv.add("/stream_options", "stream_options needs stream: true")
	}
	c.IncludeUsage = r.StreamOptions != nil && r.StreamOptions.IncludeUsage

	p.SystemPrompt, p.Messages, c.msgs = cv.messages(r.Messages)
	p.Tools = cv.tools(r.Tools)
	p.ToolChoice = cv.toolChoice(r.ToolChoice, r.ParallelToolCalls, len(r.Tools) > 0)
	p.Schema, c.schema = cv.responseFormat(r.ResponseFormat, len(r.Tools) > 0)

	if e := r.Sampled; e != nil {
		p.Retries, c.RawStream = e.Retries, e.RawStream
		if e.Retries != nil && p.Mode() == sampler.ModePlain {
			cv.add("/sampled/retries", "retries applies to a request with a JSON response_format or tools, whose answers are checked")
		}
		if e.RawStream && !r.Stream {
			cv.add("/sampled/rawStream", "rawStream needs stream: true")
		}
	}
	if len(cv.errs) > 0 {
		return nil, sampler.InvalidAll(cv.errs)
	}
	c.Params = p
	return c, nil
}

// messages converts the messages: system and developer ones into the
// system prompt, the others into domain messages, consecutive tool
// messages into one user message of tool results.
func (cv *converter) messages(msgs []chat.Message) (string, []sampler.Message, []origin) {
	var (
		system  []string
		out     []sampler.Message
		origins []origin
		// results is set while the last domain message holds tool results.
		results bool
	)
	for k, m := range msgs {
		at := "/messages/" + strconv.Itoa(k)
		if m.Name != "" {
			cv.add(at+"/name", "name is not supported by sampled; leave it out")
		}
		if len(m.ToolCalls) > 0 && m.Role != chat.RoleAssistant {
			cv.add(at+"/tool_calls", "tool_calls belong in assistant messages")
		}
		if m.ToolCallID != "" && m.Role != chat.RoleTool {
			cv.add(at+"/tool_call_id", "tool_call_id belongs in tool messages")
		}
		if m.Refusal != nil && m.Role != chat.RoleAssistant {
			cv.add(at+"/refusal", "refusal belongs in assistant messages")
		}
		switch m.Role {
		case chat.RoleSystem, chat.RoleDeveloper:
			if m.Content.Text == nil && m.Content.Parts == nil {
				cv.add(at+"/content", "content is required")
			}
			var texts []string
			for _, b := range cv.content(m.Content, at, m.Role) {
				texts = append(texts, b.block.Text)
			}
			system = append(system, strings.Join(texts, "\n"))
			continue
		case chat.RoleUser:
			if m.Content.Text == nil && m.Content.Parts == nil {
				cv.add(at+"/content", "content is required")
			}
			msg, o := sampler.UserMessage(), origin{msg: at}
			for _, b := range cv.content(m.Content, at, m.Role) {
				msg.Content = append(msg.Content, b.block)
				o.blocks = append(o.blocks, b.origin)
			}
			out, origins, results = append(out, msg), append(origins, o), false
		case chat.RoleAssistant:
			if m.Content.Text == nil && m.Content.Parts == nil && len(m.ToolCalls) == 0 && m.Refusal == nil {
				cv.add(at+"/content", "an assistant message needs content or tool_calls")
			}
			msg, o := sampler.AssistantMessage(), origin{msg: at}
			for _, b := range cv.content(m.Content, at, m.Role) {
				msg.Content = append(msg.Content, b.block)
				o.blocks = append(o.blocks, b.origin)
			}
			if m.Refusal != nil && *m.Refusal != "" {
				// What the assistant said when it refused.
				msg.Content = append(msg.Content, sampler.TextBlock(*m.Refusal))
				o.blocks = append(o.blocks, blockOrigin{path: at + "/refusal", rename: textString})
			}
			for j, tc := range m.ToolCalls {
				tat := fmt.Sprintf("%s/tool_calls/%d", at, j)
				if tc.Type != chat.TypeFunction {
					cv.add(tat+"/type", `type must be "function"`)
				}
				args := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				if !json.Valid(args) || args[0] != '{' {
					cv.add(tat+"/function/arguments", "arguments must be a JSON object, as text")
				}
				msg.Content = append(msg.Content, sampler.Content{Type: sampler.BlockToolUse, ID: tc.ID, Name: tc.Function.Name,
					Input: sampler.CompactJSON(args)})
				o.blocks = append(o.blocks, blockOrigin{path: tat, rename: toolCall})
			}
			out, origins, results = append(out, msg), append(origins, o), false
		case chat.RoleTool:
			if m.Content.Text == nil && m.Content.Parts == nil {
				cv.add(at+"/content", "content is required")
			}
			block := sampler.Content{Type: sampler.BlockToolResult, ToolUseID: m.ToolCallID, Content: []sampler.Content{}}
			for _, b := range cv.content(m.Content, at, m.Role) {
				block.Content = append(block.Content, b.block)
			}
			bo := blockOrigin{path: at, rename: toolResult}
			if results {
				last := len(out) - 1
				out[last].Content = append(out[last].Content, block)
				origins[last].blocks = append(origins[last].blocks, bo)
				continue
			}
			out = append(out, sampler.UserMessage(block))
			origins, results = append(origins, origin{msg: at, blocks: []blockOrigin{bo}}), true
		default:
			cv.add(at+"/role", "role must be system, developer, user, assistant or tool")
		}
	}
	return strings.Join(system, "\n\n"), out, origins
}

// converted is a block and where it came from.
type converted struct {
	block  sampler.Content
	origin blockOrigin
}

// content converts the content of a message of role at path at: a string
// is one text block; parts are text, and in user messages images (data
// URLs) and audio.
func (cv *converter) content(c chat.Content, at, role string) []converted {
	if c.Text != nil {
		return []converted{{sampler.TextBlock(*c.Text), blockOrigin{path: at + "/content", rename: textString}}}
	}
	var out []converted
	for j, part := range c.Parts {
		pat := fmt.Sprintf("%s/content/%d", at, j)
		for _, m := range []struct {
			name string
			set  bool
			typ  string
		}{{"text", part.Text != nil, chat.PartText}, {"image_url", part.ImageURL != nil, chat.PartImageURL},
			{"input_audio", part.InputAudio != nil, chat.PartInputAudio}} {
			if m.set && part.Type != m.typ {
				cv.add(pat+"/"+m.name, "%s belongs in a part of type %s", m.name, m.typ)
			}
		}
		switch part.Type {
		case chat.PartText:
			if part.Text == nil {
				cv.add(pat+"/text", "text is required")
				continue
			}
			out = append(out, converted{sampler.TextBlock(*part.Text), blockOrigin{path: pat}})
			continue
		case chat.PartImageURL, chat.PartInputAudio:
			if role != chat.RoleUser {
				cv.add(pat+"/type", "%s parts belong in user messages; a %s message holds text", part.Type, role)
				continue
			}
		default:
			cv.add(pat+"/type", "content part type %q is not supported by sampled; it takes text, image_url (data URLs) and input_audio", part.Type)
			continue
		}
		if part.Type == chat.PartImageURL {
			img := part.ImageURL
			if img == nil {
				cv.add(pat+"/image_url", "image_url is required")
				continue
			}
			if img.Detail != "" && img.Detail != "auto" {
				cv.add(pat+"/image_url/detail", "detail %q is not supported by sampled, which sends images as they are; leave it out", img.Detail)
			}
			mimeType, data, ok := dataURL(img.URL)
			if !ok {
				cv.add(pat+"/image_url/url", "sampled takes images as base64 data URLs (data:image/png;base64,…); fetch the image and send it inline")
				continue
			}
			out = append(out, converted{sampler.Content{Type: sampler.BlockImage, MIMEType: mimeType, Data: data}, blockOrigin{path: pat, rename: imageURL}})
			continue
		}
		audio := part.InputAudio
		if audio == nil {
			cv.add(pat+"/input_audio", "input_audio is required")
			continue
		}
		mimeType, ok := audioFormats[audio.Format]
		if !ok {
			cv.add(pat+"/input_audio/format", "format must be wav or mp3")
			continue
		}
		out = append(out, converted{sampler.Content{Type: sampler.BlockAudio, MIMEType: mimeType, Data: audio.Data}, blockOrigin{path: pat, rename: inputAudio}})
	}
	return out
}

// dataURL splits a base64 data URL into its media type and data.
func dataURL(u string) (mimeType, data string, ok bool) {
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		return "", "", false
	}
	meta, data, ok := strings.Cut(u[5:], ",")
	if !ok {
		return "", "", false
	}
	meta, ok = strings.CutSuffix(meta, ";base64")
	if !ok {
		return "", "", false
	}
	if mt, _, err := mime.ParseMediaType(meta); err == nil {
		meta = mt
	}
	return meta, data, true
}

// tools converts the function tools.
func (cv *converter) tools(tools []chat.Tool) []sampler.Tool {
	var out []sampler.Tool
	for i, t := range tools {
		if t.Type != chat.TypeFunction {
			cv.add(fmt.Sprintf("/tools/%d/type", i), `type must be "function": sampled takes function tools`)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = noParameters
		}
		out = append(out, sampler.Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	return out
}

// toolChoice converts tool_choice and parallel_tool_calls.
func (cv *converter) toolChoice(choice *chat.ToolChoice, parallel *bool, tools bool) *sampler.ToolChoice {
	var tc *sampler.ToolChoice
	if choice != nil {
		if mode, ok := choiceStrings[choice.Mode]; ok {
			tc = &sampler.ToolChoice{Mode: mode}
		} else if choice.Mode == chat.TypeFunction {
			if choice.Function == "" {
				cv.add("/tool_choice/function/name", "name is required")
			}
			tc = &sampler.ToolChoice{Mode: sampler.ToolChoiceTool, Name: choice.Function}
		} else {
			cv.add("/tool_choice", `tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":…}}`)
		}
	}
	if parallel != nil && !*parallel {
		if !tools {
			cv.add("/parallel_tool_calls", "parallel_tool_calls needs tools")
		}
		if tc == nil {
			tc = &sampler.ToolChoice{}
		}
		tc.DisableParallelToolUse = true
	}
	return tc
}

// responseFormat converts response_format to a schema, and says where in
// the request the schema is.
func (cv *converter) responseFormat(rf *chat.ResponseFormat, tools bool) (json.RawMessage, string) {
	if rf == nil {
		return nil, ""
	}
	var schema json.RawMessage
	var at string
	switch rf.Type {
	case chat.FormatText:
	case chat.FormatJSONObject:
		schema, at = anyObject, "/response_format"
	case chat.FormatJSONSchema:
		switch {
		case rf.JSONSchema == nil:
			cv.add("/response_format/json_schema", "json_schema is required")
		case len(rf.JSONSchema.Schema) == 0 || string(rf.JSONSchema.Schema) == "null":
			cv.add("/response_format/json_schema/schema", "schema is required: sampled checks the answer against it")
		default:
			schema, at = rf.JSONSchema.Schema, "/response_format/json_schema/schema"
		}
	default:
		cv.add("/response_format/type", "type must be text, json_object or json_schema")
	}
	if rf.JSONSchema != nil && rf.Type != chat.FormatJSONSchema {
		cv.add("/response_format/json_schema", "json_schema belongs in a response_format of type json_schema")
	}
	if len(schema) > 0 && tools {
		cv.add("/response_format", "a JSON response_format and tools cannot be combined in sampled: ask for one or the other")
	}
	return schema, at
}

// Err returns err with the paths of its errors put in the request's
// terms: the paths of a *sampler.InvalidError, which the domain names in
// its own request, become paths into the body that was converted; those
// of a *sampler.ExhaustedError, into the answer, name its message's
// members (/tool_calls/0/function/arguments/city) or, in schema mode,
// the members of the JSON value of its content. Other errors are returned
// as they are.
func (c *Call) Err(err error) error {
	var inv *sampler.InvalidError
	if errors.As(err, &inv) {
		errs := make([]sampler.FieldError, len(inv.Errors))
		for i, e := range inv.Errors {
			errs[i] = sampler.FieldError{Path: c.path(e.Path), Message: e.Message}
		}
		if len(errs) == 0 {
			return err
		}
		return sampler.InvalidAll(errs)
	}
	var ex *sampler.ExhaustedError
	if errors.As(err, &ex) {
		out := *ex
		out.Errors = make([]sampler.FieldError, len(ex.Errors))
		for i, e := range ex.Errors {
			out.Errors[i] = sampler.FieldError{Path: answerPath(e.Path), Message: e.Message}
		}
		return &out
	}
	return err
}

// cut splits a JSON Pointer after its first token: "/a/b" is "/a", "/b".
func cut(p string) (head, rest string) {
	if i := strings.IndexByte(p[min(1, len(p)):], '/'); i >= 0 {
		return p[:i+1], p[i+1:]
	}
	return p, ""
}

// index reads a pointer token "/3" as an index below n.
func index(tok string, n int) (int, bool) {
	i, err := strconv.Atoi(strings.TrimPrefix(tok, "/"))
	return i, err == nil && i >= 0 && i < n
}

// path puts a path of the domain's request in the request's terms.
func (c *Call) path(p string) string {
	head, rest := cut(p)
	switch head {
	case "/messages":
		return c.messagePath(rest)
	case "/systemPrompt":
		return "/messages"
	case "/maxTokens":
		return c.maxTokens + rest
	case "/stopSequences":
		return "/stop" + rest
	case "/schema":
		if c.schema != "" {
			return c.schema + rest
		}
		return "/response_format"
	case "/retries":
		return "/sampled/retries"
	case "/toolChoice":
		if rest == "/name" {
			return "/tool_choice/function/name"
		}
		return "/tool_choice"
	case "/tools":
		i, rest := cut(rest)
		member, rest := cut(rest)
		switch member {
		case "/inputSchema":
			member = "/function/parameters"
		case "/name", "/description":
			member = "/function" + member
		}
		return "/tools" + i + member + rest
	}
	return p
}

// messagePath puts rest, a path under the domain's /messages, in the
// request's terms.
func (c *Call) messagePath(rest string) string {
	i, rest := cut(rest)
	n, ok := index(i, len(c.msgs))
	if !ok {
		return "/messages" + i + rest
	}
	o := c.msgs[n]
	member, rest := cut(rest)
	if member != "/content" {
		return o.msg + member + rest
	}
	j, rest := cut(rest)
	b, ok := index(j, len(o.blocks))
	if !ok {
		return o.msg + "/content" + j + rest
	}
	bo := o.blocks[b]
	member, tail := cut(rest)
	if to, ok := bo.rename[member]; ok {
		return bo.path + to + tail
	}
	return bo.path + rest
}

// answerPath puts a path into the domain's answer (/toolCalls/0/name) in
// the terms of the answer's message (/tool_calls/0/function/name).
func answerPath(p string) string {
	head, rest := cut(p)
	if head != "/toolCalls" {
		return p
	}
	i, rest := cut(rest)
	member, rest := cut(rest)
	if member == "/name" || member == "/arguments" {
		member = "/function" + member
	}
	return "/tool_calls" + i + member + rest
}
