package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// JSON Schema builders for the tool table.
type js = map[string]any

func str(desc string) js { return js{"type": "string", "description": desc} }

func strs(desc string) js {
	return js{"type": "array", "items": js{"type": "string"}, "description": desc}
}

func enum(values []string) js { return js{"type": "string", "enum": values} }

// object is a closed object schema whose listed members are required.
func object(props js, required ...string) js {
	if required == nil {
		required = []string{}
	}
	return js{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the schemas are code
	}
	return b
}

// job is one sampling request of a shaped tool.
type job struct {
	system string
	user   string
	// schema is the answer's schema (guaranteed path); nil samples plain
	// text.
	schema js
	// result turns the validated answer (schema) or the text (plain) into
	// the tool's structured result; nil returns the answer as it is.
	result func(answer json.RawMessage, text string) (any, error)
}

// shaped is a tool answered by one sampling request.
func (s *Server) shaped(name, title, desc string, input, output js, build func(args json.RawMessage) (*job, error)) tool {
	return tool{
		def: &mcp.Tool{Name: name, Title: title, Description: desc, InputSchema: raw(input), OutputSchema: raw(output),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}},
		run: func(ctx context.Context, c *call) (any, error) {
			j, err := build(c.req.Params.Arguments)
			if err != nil {
				return nil, err
			}
			svc, err := c.sampler(nil)
			if err != nil {
				return nil, err
			}
			p := &sampler.Params{Request: sampler.Request{
				Messages:     []sampler.Message{sampler.UserMessage(sampler.TextBlock(j.user))},
				SystemPrompt: j.system,
				MaxTokens:    svc.DefaultMaxTokens(),
			}}
			var res *sampler.Result
			if j.schema != nil {
				p.Schema = raw(j.schema)
				res, err = svc.SampleSchema(ctx, p)
			} else {
				res, err = svc.Sample(ctx, p)
			}
			if err != nil {
				return nil, sampleError(ctx, err)
			}
			if j.result == nil {
				return res.Parsed, nil
			}
			return j.result(res.Parsed, res.Text)
		},
	}
}

func ptr[T any](v T) *T { return &v }

// decode reads a tool's arguments, already valid for its input schema.
func decode[T any](args json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(args, &v); err != nil {
		return v, &toolError{outcome: outcomeInvalidArgs, text: "invalid arguments: " + err.Error()}
	}
	return v, nil
}

// section renders a labelled part of a prompt, or nothing when empty.
func section(label, text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	return "\n\n" + label + ":\n" + text
}

func bullets(items []string) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString("- " + it + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

const systemPrefix = "You are a careful assistant answering one request of a program. "

// tools returns the agent tools.
func (s *Server) tools() []tool {
	return []tool{s.decide(), s.analyze(), s.extract(), s.classify(), s.summarize(), s.generate(), s.compare(), s.delegate(), s.sample()}
}

func (s *Server) decide() tool {
	input := object(js{
		"question": js{"type": "string", "minLength": 1, "description": "The decision to make."},
		"options": js{"type": "array", "items": js{"type": "string", "minLength": 1}, "minItems": 2, "uniqueItems": true,
			"description": "The choices; without them the answer is yes or no."},
		"context": str("What the decision depends on."),
	}, "question")
	output := object(js{
		"choice":     str("One of the options (or yes/no)."),
		"reasoning":  str("Why."),
		"confidence": js{"type": "number", "minimum": 0, "maximum": 1},
	}, "choice", "reasoning", "confidence")
	return s.shaped("agent_decide", "Decide", "Make a decision: choose one of the options (yes or no when none are given), with reasoning and a confidence in [0,1].",
		input, output, func(args json.RawMessage) (*job, error) {
			a, err := decode[struct {
				Question string   `json:"question"`
				Options  []string `json:"options"`
				Context  string   `json:"context"`
			}](args)
			if err != nil {
				return nil, err
			}
			options := a.Options
			if len(options) == 0 {
				options = []string{"yes", "no"}
			}
			schema := object(js{"choice": enum(options), "reasoning": js{"type": "string"},
				"confidence": js{"type": "number", "minimum": 0, "maximum": 1}}, "choice", "reasoning", "confidence")
			return &job{
				system: systemPrefix + "Make the decision asked for. Choose exactly one of the options, explain briefly, and give your confidence between 0 and 1.",
				user:   "Question: " + a.Question + section("Options", bullets(options)) + section("Context", a.Context),
				schema: schema,
			}, nil
		})
}

func (s *Server) analyze() tool {
	input := object(js{
		"data":  js{"description": "What to analyze: text, or any JSON value."},
		"focus": str("What the analysis should concentrate on."),
	}, "data")
	output := object(js{
		"summary":         js{"type": "string"},
		"findings":        strs("What the data shows."),
		"risks":           strs("Problems or dangers."),
		"recommendations": strs("What to do."),
	}, "summary", "findings", "risks", "recommendations")
	return s.shaped("agent_analyze", "Analyze", "Analyze data: a summary, findings, risks and recommendations.",
		input, output, func(args json.RawMessage) (*job, error) {
			a, err := decode[struct {
				Data  json.RawMessage `json:"data"`
				Focus string          `json:"focus"`
			}](args)
			if err != nil {
				return nil, err
			}
			data := string(a.Data)
			var text string
			if json.Unmarshal(a.Data, &text) == nil {
				data = text
			}
			return &job{
				system: systemPrefix + "Analyze the data: summarize it, list findings, risks and recommendations.",
				user:   "Data:\n" + data + section("Focus", a.Focus),
				schema: output,
			}, nil
		})
}

func (s *Server) extract() tool {
	input := object(js{
		"text":   js{"type": "string", "minLength": 1, "description": "The text to extract from."},
		"schema": js{"type": "object", "description": "A JSON Schema the extracted value must validate against."},
	}, "text", "schema")
	output := object(js{"value": js{"description": "The extracted value; it validates against the given schema."}}, "value")
	return s.shaped("agent_extract", "Extract", "Extract a value from text that validates against the given JSON Schema; the answer is validated and corrected until it does.",
		input, output, func(args json.RawMessage) (*job, error) {
			a, err := decode[struct {
				Text   string          `json:"text"`
				Schema json.RawMessage `json:"schema"`
			}](args)
			if err != nil {
				return nil, err
			}
			// The schema is the caller's: an invalid one names its paths.
			if _, err := s.o.Sampling.Schemas.Compile(a.Schema, "/schema"); err != nil {
				return nil, sampleError(context.Background(), err)
			}
			var schema js
			if err := json.Unmarshal(a.Schema, &schema); err != nil {
				return nil, &toolError{outcome: outcomeInvalidArgs, text: "invalid arguments: /schema: " + err.Error()}
			}
			return &job{
				system: systemPrefix + "Extract from the text the value the JSON Schema describes. Use only what the text says.",
				user:   "Text:\n" + a.Text,
				schema: schema,
				result: func(answer json.RawMessage, _ string) (any, error) { return js{"value": answer}, nil },
			}, nil
		})
}

func (s *Server) classify() tool {
	input := object(js{
		"text":       js{"type": "string", "minLength": 1, "description": "The text to classify."},
		"categories": js{"type": "array", "items": js{"type": "string", "minLength": 1}, "minItems": 2, "uniqueItems": true},
		"multiLabel": js{"type": "boolean", "description": "Allow more than one label (default false)."},
	}, "text", "categories")
	output := object(js{
		"labels": strs("The chosen categories."),
		"scores": js{"type": "object", "additionalProperties": js{"type": "number", "minimum": 0, "maximum": 1},
			"description": "A score in [0,1] per category."},
	}, "labels", "scores")
	return s.shaped("agent_classify", "Classify", "Classify text into the given categories (one label, or several with multiLabel), with a score per category.",
		input, output, func(args json.RawMessage) (*job, error) {
			a, err := decode[struct {
				Text       string   `json:"text"`
				Categories []string `json:"categories"`
				MultiLabel bool     `json:"multiLabel"`
			}](args)
			if err != nil {
				return nil, err
			}
			labels := js{"type": "array", "items": enum(a.Categories), "minItems": 1, "uniqueItems": true}
			rule := "Choose exactly one label."
			if !a.MultiLabel {
				labels["maxItems"] = 1
			} else {
				rule = "Choose every label that applies (at least one)."
			}
			scores := js{}
			for _, c := range a.Categories {
				scores[c] = js{"type": "number", "minimum": 0, "maximum": 1}
			}
			return &job{
				system: systemPrefix + "Classify the text into the categories. " + rule + " Score every category between 0 and 1.",
				user:   "Text:\n" + a.Text + section("Categories", bullets(a.Categories)),
				schema: object(js{"labels": labels, "scores": object(scores, a.Categories...)}, "labels", "scores"),
			}, nil
		})
}

func (s *Server) summarize() tool {
	input := object(js{
		"text":     js{"type": "string", "minLength": 1, "description": "The text to summarize."},
		"maxWords": js{"type": "integer", "minimum": 1, "maximum": 2000, "description": "The summary's length limit in words."},
		"style":    str("How to write it, e.g. neutral, executive, bullet-like."),
	}, "text")
	output := object(js{"summary": js{"type": "string"}, "keyPoints": strs("The main points.")}, "summary", "keyPoints")
	return s.shaped("agent_summarize", "Summarize", "Summarize text: a summary (within maxWords when given) and its key points.",
		input, output, func(args json.RawMessage) (*job, error) {
			a, err := decode[struct {
				Text     string `json:"text"`
				MaxWords int    `json:"maxWords"`
				Style    string `json:"style"`
			}](args)
			if err != nil {
				return nil, err
			}
			system := systemPrefix + "Summarize the text and list its key points."
			if a.MaxWords > 0 {
				system += fmt.Sprintf(" The summary has at most %d words.", a.MaxWords)
			}
			if a.Style != "" {
				system += " Style: " + a.Style + "."
			}
			return &job{system: system, user: "Text:\n" + a.Text, schema: output,
				result: func(answer json.RawMessage, _ string) (any, error) {
					var out struct {
						Summary   string   `json:"summary"`
						KeyPoints []string `json:"keyPoints"`
					}
					if err := json.Unmarshal(answer, &out); err != nil {
						return nil, err
					}
					if words := strings.Fields(out.Summary); a.MaxWords > 0 && len(words) > a.MaxWords {
						// The limit holds whatever the model wrote.
						out.Summary = strings.Join(words[:a.MaxWords], " ") + " …"
					}
					return out, nil
				}}, nil
		})
}

// Formats of agent_generate.
const (
	formatText     = "text"
	formatMarkdown = "markdown"
	formatCode     = "code"
	formatJSON     = "json"
)

func (s *Server) generate() tool {
	input := object(js{
		"instructions": js{"type": "string", "minLength": 1, "description": "What to write."},
		"format":       js{"type": "string", "enum": []string{formatText, formatMarkdown, formatCode, formatJSON}, "description": "Default text; json when schema is given."},
		"language":     str("The programming language (code) or natural language to write in."),
		"schema":       js{"type": "object", "description": "A JSON Schema the content must validate against (format json)."},
	}, "instructions")
	output := object(js{
		"content": js{"description": "The text, or with format json the JSON value."},
		"format":  enum([]string{formatText, formatMarkdown, formatCode, formatJSON}),
	}, "content", "format")
	return s.shaped("agent_generate", "Generate", "Generate content: text, markdown, code, or a JSON value (validated against schema when given).",
		input, output, func(args json.RawMessage) (*job, error) {
			a, err := decode[struct {
				Instructions string          `json:"instructions"`
				Format       string          `json:"format"`
				Language     string          `json:"language"`
				Schema       json.RawMessage `json:"schema"`
			}](args)
			if err != nil {
				return nil, err
			}
			format := a.Format
			switch {
			case format == "" && len(a.Schema) > 0:
				format = formatJSON
			case format == "":
				format = formatText
			case format != formatJSON && len(a.Schema) > 0:
				return nil, &toolError{outcome: outcomeInvalidArgs, text: "invalid arguments:\n- /schema: schema needs format json"}
			}
			system := systemPrefix + "Write what the instructions ask for, and nothing else."
			if a.Language != "" {
				system += " Language: " + a.Language + "."
			}
			j := &job{system: system, user: a.Instructions}
			switch format {
			case formatJSON:
				j.schema = js{}
				if len(a.Schema) > 0 {
					if _, err := s.o.Sampling.Schemas.Compile(a.Schema, "/schema"); err != nil {
						return nil, sampleError(context.Background(), err)
					}
					if err := json.Unmarshal(a.Schema, &j.schema); err != nil {
						return nil, &toolError{outcome: outcomeInvalidArgs, text: "invalid arguments: /schema: " + err.Error()}
					}
				}
				j.result = func(answer json.RawMessage, _ string) (any, error) {
					return js{"content": answer, "format": format}, nil
				}
			case formatCode:
				j.system += " Answer with the code only, without a Markdown fence."
				j.result = func(_ json.RawMessage, text string) (any, error) {
					return js{"content": unfence(text), "format": format}, nil
				}
			case formatMarkdown:
				j.system += " Use Markdown."
				fallthrough
			default:
				j.result = func(_ json.RawMessage, text string) (any, error) { return js{"content": text, "format": format}, nil }
			}
			return j, nil
		})
}

// unfence removes one Markdown code fence around text.
func unfence(text string) string {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return text
	}
	t = strings.TrimSuffix(t, "```")
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		return strings.TrimSpace(t[i+1:])
	}
	return text
}

func (s *Server) compare() tool {
	input := object(js{
		"options":  js{"type": "array", "items": js{"type": "string", "minLength": 1}, "minItems": 2, "uniqueItems": true, "description": "What to compare."},
		"criteria": strs("What to compare them by."),
		"context":  str("What the comparison is for."),
	}, "options")
	output := object(js{
		"ranking":   strs("Every option, best first."),
		"best":      js{"type": "string"},
		"rationale": js{"type": "string"},
	}, "ranking", "best", "rationale")
	return s.shaped("agent_compare", "Compare", "Compare options: rank them all, best first, name the best and give the rationale.",
		input, output, func(args json.RawMessage) (*job, error) {
			a, err := decode[struct {
				Options  []string `json:"options"`
				Criteria []string `json:"criteria"`
				Context  string   `json:"context"`
			}](args)
			if err != nil {
				return nil, err
			}
			n := len(a.Options)
			schema := object(js{
				"ranking":   js{"type": "array", "items": enum(a.Options), "minItems": n, "maxItems": n, "uniqueItems": true},
				"best":      enum(a.Options),
				"rationale": js{"type": "string"},
			}, "ranking", "best", "rationale")
			return &job{
				system: systemPrefix + "Compare the options. Rank every option exactly once, best first; best is the first of the ranking.",
				user:   "Options:\n" + bullets(a.Options) + section("Criteria", bullets(a.Criteria)) + section("Context", a.Context),
				schema: schema,
			}, nil
		})
}
