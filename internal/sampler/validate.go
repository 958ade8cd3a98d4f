package sampler

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"strconv"
	"strings"
)

// checkRequest applies the rules a request must satisfy before any provider
// is called and returns what is wrong; paths are JSON Pointers into the
// request body.
func checkRequest(p *Params, schemas *SchemaCache) []FieldError {
	var errs fieldErrs
	if len(p.Messages) == 0 {
		errs.add("/messages", "at least one message is required")
	}
	switch {
	case p.MaxTokens <= 0:
		errs.add("/maxTokens", "maxTokens must be greater than 0")
	case p.MaxTokens > MaxTokensLimit:
		errs.add("/maxTokens", "maxTokens must be at most %d", MaxTokensLimit)
	}
	if p.Temperature != nil && (*p.Temperature < 0 || *p.Temperature > 2) {
		errs.add("/temperature", "temperature must be between 0 and 2")
	}
	if len(p.Metadata) > 0 && !isObject(p.Metadata) {
		errs.add("/metadata", "metadata must be an object")
	}
	if mp := p.ModelPreferences; mp != nil {
		for _, pr := range []struct {
			name string
			v    *float64
		}{{"costPriority", mp.CostPriority}, {"speedPriority", mp.SpeedPriority}, {"intelligencePriority", mp.IntelligencePriority}} {
			if pr.v != nil && (*pr.v < 0 || *pr.v > 1) {
				errs.add("/modelPreferences/"+pr.name, "%s must be between 0 and 1", pr.name)
			}
		}
	}
	if len(p.Schema) > 0 && len(p.Tools) > 0 {
		errs.add("/tools", "schema and tools are mutually exclusive")
	}
	checkMessages(p.Messages, &errs)
	if len(p.Schema) > 0 {
		if _, err := schemas.Compile(p.Schema, "/schema"); err != nil {
			errs = append(errs, fieldErrors(err)...)
		}
	}
	var names map[string]bool
	if len(p.Tools) > 0 {
		names = checkTools(p.Tools, schemas, &errs)
	}
	if tc := p.ToolChoice; tc != nil {
		switch tc.Mode {
		case "", ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
		case ToolChoiceTool:
			if !names[tc.Name] {
				errs.add("/toolChoice/name", "toolChoice names tool %q, which is not declared in tools", tc.Name)
			}
		default:
			errs.add("/toolChoice/mode", "mode must be one of auto, required, none, tool")
		}
		if len(p.Tools) == 0 && tc.Mode != "" && tc.Mode != ToolChoiceAuto && tc.Mode != ToolChoiceNone {
			errs.add("/toolChoice", "toolChoice %q needs tools", tc.Mode)
		}
	}
	return errs
}

// fieldErrs collects the errors of a request's checks.
type fieldErrs []FieldError

// add adds the error at path, its message formatted as fmt.Sprintf does.
func (e *fieldErrs) add(path, format string, args ...any) {
	*e = append(*e, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// checkTools checks the declared tools, as checkRequest says, adding
// their errors to errs, and returns their names. It is a function of its
// own so that a request without tools keeps a small stack.
func checkTools(tools []Tool, schemas *SchemaCache, errs *fieldErrs) map[string]bool {
	names := map[string]bool{}
	for i, t := range tools {
		at := fmt.Sprintf("/tools/%d", i)
		switch {
		case t.Name == "":
			errs.add(at+"/name", "tool name is required")
		case !toolName(t.Name):
			errs.add(at+"/name", badToolName, MaxToolNameLen)
		case names[t.Name]:
			errs.add(at+"/name", "tool %q is declared twice", t.Name)
		}
		names[t.Name] = true
		for _, m := range []struct {
			name, kind string
			v          json.RawMessage
		}{{"outputSchema", "object", t.OutputSchema}, {"annotations", "object", t.Annotations}, {"icons", "array", t.Icons},
			{"execution", "object", t.Execution}, {"_meta", "object", t.Meta}} {
			if m.v != nil && !jsonKindIs(m.v, m.kind) {
				errs.add(at+"/"+m.name, "%s must be %s", m.name, kindName(m.kind))
			}
		}
		if len(t.InputSchema) == 0 {
			errs.add(at+"/inputSchema", "inputSchema is required")
			continue
		}
		var head struct {
			Type any `json:"type"`
		}
		if json.Unmarshal(t.InputSchema, &head) != nil || head.Type != "object" {
			errs.add(at+"/inputSchema/type", `inputSchema must be an object schema ("type": "object")`)
			continue
		}
		if _, err := schemas.Compile(t.InputSchema, at+"/inputSchema"); err != nil {
			*errs = append(*errs, fieldErrors(err)...)
		}
	}
	return names
}

// checkMessages enforces MCP's message rules: roles and block types per
// role, a user message holding tool_result blocks holds nothing else, and
// every tool_use of an assistant message is answered by a tool_result in the
// next user message.
func checkMessages(msgs []Message, errs *fieldErrs) {
	for i := range msgs {
		m := &msgs[i]
		if m.Role != RoleUser && m.Role != RoleAssistant {
			errs.add(messagePath(i)+"/role", "role must be user or assistant")
			continue
		}
		if len(m.Content) == 0 {
			errs.add(messagePath(i)+"/content", "content must hold at least one block")
			continue
		}
		// Text alone has no rule of its own. The checks of other blocks
		// are a function of their own, so that a text request's stack
		// stays small (a deeper one grows and is copied anew after every
		// garbage collection).
		if !allText(m.Content) {
			checkBlocks(msgs, i, errs)
		}
	}
}

// allText tells whether every block is text.
func allText(blocks []Content) bool {
	for i := range blocks {
		if blocks[i].Type != BlockText {
			return false
		}
	}
	return true
}

// checkBlocks checks the blocks of message i of msgs, which are not all
// text, as checkMessages says.
func checkBlocks(msgs []Message, i int, errs *fieldErrs) {
	m := msgs[i]
	results := 0
	asked := map[string]bool{}
	ids := map[string]bool{}
	if i > 0 && msgs[i-1].Role == RoleAssistant {
		for _, c := range msgs[i-1].Content {
			if c.Type == BlockToolUse {
				asked[c.ID] = true
			}
		}
	}
	for j, c := range m.Content {
		switch c.Type {
		case BlockText:
		case BlockImage, BlockAudio:
			if c.Data == "" || c.MIMEType == "" {
				errs.add(blockPath(i, m, j), "%s blocks need data and mimeType", c.Type)
				break
			}
			// A provider would refuse them, and its 400 would reach the
			// client as a 502.
			if mt, _, err := mime.ParseMediaType(c.MIMEType); err != nil || !strings.HasPrefix(mt, c.Type+"/") {
				errs.add(blockPath(i, m, j)+"/mimeType", "%q is not an %s media type (%s/...)", c.MIMEType, c.Type, c.Type)
			}
			if _, err := base64.StdEncoding.DecodeString(c.Data); err != nil {
				errs.add(blockPath(i, m, j)+"/data", "data must be base64 (RFC 4648 with padding): %v", err)
			}
		case BlockToolUse:
			if m.Role != RoleAssistant {
				errs.add(blockPath(i, m, j), "tool_use blocks belong in assistant messages")
			}
			if c.ID == "" || c.Name == "" {
				errs.add(blockPath(i, m, j), "tool_use blocks need id and name")
			}
			if len(c.Input) > 0 && c.Input[0] != '{' {
				errs.add(blockPath(i, m, j)+"/input", "input must be an object")
			}
			if c.ID != "" && ids[c.ID] {
				errs.add(blockPath(i, m, j)+"/id", "tool_use id %q is used twice in this message", c.ID)
			}
			ids[c.ID] = true
		case BlockToolResult:
			results++
			if m.Role != RoleUser {
				errs.add(blockPath(i, m, j), "tool_result blocks belong in user messages")
			}
			if c.ToolUseID == "" {
				errs.add(blockPath(i, m, j)+"/toolUseId", "toolUseId is required")
			} else if !asked[c.ToolUseID] {
				errs.add(blockPath(i, m, j)+"/toolUseId", "tool_result %q answers no tool_use of the previous assistant message", c.ToolUseID)
			}
		default:
			errs.add(blockPath(i, m, j)+"/type", "unknown content block type %q", c.Type)
		}
	}
	if results > 0 && results != len(m.Content) {
		errs.add(messagePath(i)+"/content", "a user message holding tool_result blocks must hold nothing else")
	}
	if m.Role != RoleAssistant {
		return
	}
	var answered map[string]bool
	if i+1 < len(msgs) && msgs[i+1].Role == RoleUser {
		answered = map[string]bool{}
		for _, c := range msgs[i+1].Content {
			if c.Type == BlockToolResult {
				answered[c.ToolUseID] = true
			}
		}
	}
	for j, c := range m.Content {
		if c.Type != BlockToolUse || c.ID == "" || answered[c.ID] {
			continue
		}
		if i+1 == len(msgs) {
			errs.add(blockPath(i, m, j), "tool_use %q is the last message; answer it with a tool_result in a user message", c.ID)
		} else {
			errs.add(blockPath(i, m, j), "tool_use %q is not answered by a tool_result in the next user message", c.ID)
		}
	}
}

// toolName reports whether name is a tool name both MCP and the providers
// take: 1 to MaxToolNameLen ASCII letters, digits, "_" or "-". MCP also
// allows ".", and 128 characters; OpenAI and Anthropic refuse them.
func toolName(name string) bool {
	if name == "" || len(name) > MaxToolNameLen {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// badToolName says what a tool name must be (given MaxToolNameLen),
// without echoing one that is not: it may hold control or bidirectional
// characters.
const badToolName = "a tool name is 1 to %d ASCII letters, digits, \"_\" or \"-\", as MCP and the providers take it"

// messagePath is the JSON Pointer of message i. Paths are made only for
// errors: a valid request makes none.
func messagePath(i int) string { return "/messages/" + strconv.Itoa(i) }

// blockPath is the JSON Pointer of block j of message m, message i: the
// content itself when it arrived as one bare block.
func blockPath(i int, m Message, j int) string {
	if m.single {
		return messagePath(i) + "/content"
	}
	return messagePath(i) + "/content/" + strconv.Itoa(j)
}

// fieldErrors returns the field errors of an *InvalidError, or one error at
// the root for anything else.
func fieldErrors(err error) []FieldError {
	if ie, ok := err.(*InvalidError); ok {
		return ie.Errors
	}
	return []FieldError{{Path: "/", Message: err.Error()}}
}
