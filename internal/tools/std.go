package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the now tool must know every IANA zone, even in a bare container
	"unicode"
	"unicode/utf8"

	"github.com/kaptinlin/jsonpointer"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The input schemas of the std tools. They carry descriptions and examples
// so that a model can produce meaningful calls. (The offline model does not
// copy the examples: its arguments come from the prompt's text.)
const (
	calculateSchema = `{
  "type": "object",
  "properties": {
    "expression": {
      "type": "string",
      "description": "An arithmetic expression: decimal numbers, + - * / % (remainder), ^ (power), unary minus and parentheses.",
      "examples": ["2 * (3 + 4)", "-1.5 ^ 2 + 10 % 4", "(100 - 7.5) / 3"]
    }
  },
  "required": ["expression"],
  "additionalProperties": false,
  "examples": [{"expression": "2 * (3 + 4)"}]
}`
	nowSchema = `{
  "type": "object",
  "properties": {
    "timezone": {
      "type": "string",
      "description": "An IANA time zone name.",
      "default": "UTC",
      "examples": ["Europe/Paris", "America/New_York", "UTC"]
    }
  },
  "additionalProperties": false,
  "examples": [{"timezone": "Europe/Paris"}]
}`
	jsonQuerySchema = `{
  "type": "object",
  "properties": {
    "document": {
      "description": "The JSON document: JSON text in a string, or the JSON value itself.",
      "examples": ["{\"users\": [{\"name\": \"Ada\", \"langs\": [\"en\", \"fr\"]}]}", {"a": [{"b": 1}]}]
    },
    "path": {
      "type": "string",
      "description": "Where the value is: a JSON Pointer such as /users/0/name, or a dotted path such as users.0.name. Empty means the whole document.",
      "examples": ["/users/0/name", "users.0.langs.1", "a.0.b"]
    }
  },
  "required": ["document", "path"],
  "additionalProperties": false,
  "examples": [{"document": "{\"users\": [{\"name\": \"Ada\"}]}", "path": "/users/0/name"}]
}`
	textStatsSchema = `{
  "type": "object",
  "properties": {
    "text": {
      "type": "string",
      "description": "The text to measure.",
      "examples": ["The quick brown fox jumps over the lazy dog. It barked!\nThe end."]
    }
  },
  "required": ["text"],
  "additionalProperties": false,
  "examples": [{"text": "Hello world. How are you?\nFine!"}]
}`
)

// newStdServer returns the built-in server with its tools: calculate, now
// (telling the time of now), json_query and text_stats. Every tool is
// deterministic (given the clock) and touches nothing outside the process.
func newStdServer(now func() time.Time) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sampled-std", Title: "sampled built-in tools", Version: clientVersion}, nil)
	addStdTool(srv, "calculate", "Evaluate an arithmetic expression exactly as written (+ - * / % ^, parentheses, unary minus, decimals) and return its value.",
		calculateSchema, calculateTool)
	addStdTool(srv, "now", "Return the current date and time in an IANA time zone, in RFC 3339 format.",
		nowSchema, func(in struct {
			Timezone string `json:"timezone"`
		}) (string, any, error) {
			return nowTool(now(), in.Timezone)
		})
	addStdTool(srv, "json_query", "Return the value at a path (JSON Pointer or dotted) in a JSON document.",
		jsonQuerySchema, jsonQueryTool)
	addStdTool(srv, "text_stats", "Count the characters, words, lines and sentences of a text.",
		textStatsSchema, textStatsTool)
	return srv
}

// addStdTool adds a tool whose function f takes the decoded arguments and
// returns the result's text and structured content. Arguments that do not
// decode, and an error of f, are a tool-level error: a result the model
// reads.
func addStdTool[In any](srv *mcp.Server, name, description, schema string, f func(In) (string, any, error)) {
	t := &mcp.Tool{Name: name, Description: description, InputSchema: json.RawMessage(schema)}
	srv.AddTool(t, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return toolError(fmt.Errorf("invalid arguments: %w", err)), nil
		}
		text, structured, err := f(in)
		if err != nil {
			return toolError(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured}, nil
	})
}

// toolError is a tool-level error: a result the model reads.
func toolError(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

func calculateTool(in struct {
	Expression string `json:"expression"`
}) (string, any, error) {
	v, err := calculate(in.Expression)
	if err != nil {
		return "", nil, fmt.Errorf("cannot calculate %q: %w", in.Expression, err)
	}
	text, _ := json.Marshal(v) // finite, so it marshals
	return string(text), map[string]any{"value": v}, nil
}

// nowTool tells the time t in zone, UTC by default.
func nowTool(t time.Time, zone string) (string, any, error) {
	name := zone
	if name == "" {
		name = "UTC"
	}
	// "Local" would tell the zone of the host, which is neither IANA nor
	// deterministic.
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return "", nil, fmt.Errorf("unknown time zone %q: want an IANA name such as Europe/Paris", zone)
	}
	t = t.In(loc)
	s := t.Format(time.RFC3339)
	return s, map[string]any{"time": s, "timezone": name, "unix": t.Unix()}, nil
}

func jsonQueryTool(in struct {
	Document json.RawMessage `json:"document"`
	Path     string          `json:"path"`
}) (string, any, error) {
	if len(in.Document) == 0 {
		return "", nil, errors.New("document is required")
	}
	doc := in.Document
	var text string
	if json.Unmarshal(doc, &text) == nil {
		// JSON text in a string.
		if !json.Valid([]byte(text)) {
			return "", nil, errors.New("document is a string that is not JSON text")
		}
		doc = json.RawMessage(text)
	}
	v, err := queryJSON(doc, in.Path)
	if err != nil {
		return "", nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return "", nil, err
	}
	return buf.String(), map[string]any{"value": json.RawMessage(buf.Bytes())}, nil
}

// queryJSON returns the value at path in doc. A path starting with "/" is
// a JSON Pointer (RFC 6901); any other non-empty path is dotted
// ("a.0.b"); the empty path is the whole document.
func queryJSON(doc json.RawMessage, path string) (json.RawMessage, error) {
	var tokens []string
	switch {
	case path == "":
	case strings.HasPrefix(path, "/"):
		p, err := jsonpointer.Parse(path)
		if err != nil {
			return nil, fmt.Errorf("path %q: %w", path, err)
		}
		tokens = p.Tokens()
	default:
		tokens = strings.Split(path, ".")
	}
	v := doc
	at := ""
	for _, tok := range tokens {
		v = bytes.TrimSpace(v)
		switch {
		case len(v) > 0 && v[0] == '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(v, &obj); err != nil {
				return nil, fmt.Errorf("document: %w", err)
			}
			next, ok := obj[tok]
			if !ok {
				return nil, fmt.Errorf("no value at %s/%s: the object has no member %q", at, tok, tok)
			}
			v = next
		case len(v) > 0 && v[0] == '[':
			var arr []json.RawMessage
			if err := json.Unmarshal(v, &arr); err != nil {
				return nil, fmt.Errorf("document: %w", err)
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || strconv.Itoa(i) != tok { // digits without a leading zero
				return nil, fmt.Errorf("no value at %s/%s: %q is not an array index", at, tok, tok)
			}
			if i >= len(arr) {
				return nil, fmt.Errorf("no value at %s/%s: the array has %d elements", at, tok, len(arr))
			}
			v = arr[i]
		default:
			if at == "" {
				return nil, fmt.Errorf("no value at /%s: the document is not an object or array", tok)
			}
			return nil, fmt.Errorf("no value at %s/%s: %s is not an object or array", at, tok, at)
		}
		at += "/" + tok
	}
	if !json.Valid(v) {
		return nil, errors.New("document is not valid JSON")
	}
	return v, nil
}

// textStats are the counts of the text_stats tool.
type textStats struct {
	Characters int `json:"characters"`
	Words      int `json:"words"`
	Lines      int `json:"lines"`
	Sentences  int `json:"sentences"`
}

func textStatsTool(in struct {
	Text *string `json:"text"`
}) (string, any, error) {
	if in.Text == nil {
		return "", nil, errors.New("text is required")
	}
	s := countText(*in.Text)
	return fmt.Sprintf("characters: %d, words: %d, lines: %d, sentences: %d", s.Characters, s.Words, s.Lines, s.Sentences), s, nil
}

// countText counts characters (runes), words (runs of non-space), lines
// (a final newline ends the last line rather than starting one) and
// sentences (runs of . ! ? followed by a space or the end close a
// sentence; trailing text with letters or digits is one more).
func countText(s string) textStats {
	st := textStats{Characters: utf8.RuneCountInString(s), Words: len(strings.Fields(s))}
	if s != "" {
		st.Lines = strings.Count(s, "\n")
		if !strings.HasSuffix(s, "\n") {
			st.Lines++
		}
	}
	content := false // letters or digits since the last sentence end
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '.' || r == '!' || r == '?' || r == '…':
			j := i
			for j+1 < len(rs) && strings.ContainsRune(".!?…\"')]»”’", rs[j+1]) {
				j++
			}
			if (j+1 == len(rs) || unicode.IsSpace(rs[j+1])) && content {
				st.Sentences++
				content = false
			}
			i = j
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			content = true
		}
	}
	if content {
		st.Sentences++
	}
	return st
}
