package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/sampler"
)

// props are the properties of an object schema, by name.
type props = map[string]*jsonschema.Schema

// schemaOf derives T's JSON Schema from its fields (jsonschema tags are
// descriptions; a json.RawMessage member holds any value), and lets set
// add what Go types cannot say: bounds, lengths, enums.
func schemaOf[T any](set func(p props)) *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %v", err)) // the types are code
	}
	if set != nil {
		set(s.Properties)
	}
	return s
}

// narrow is the one place a call narrows a schema: the schema its answer
// must validate against is the tool's output schema with what the call's
// arguments say (e.g. an enum of the options it gave) set by set.
func narrow(out *jsonschema.Schema, set func(p props)) json.RawMessage {
	s := out.CloneSchemas()
	set(s.Properties)
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %v", err)) // the schemas are code
	}
	return b
}

// enum lists values for Schema.Enum.
func enum(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

// score is a number in [0,1].
func score() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "number", Minimum: jsonschema.Ptr(0.0), Maximum: jsonschema.Ptr(1.0)}
}

// choices are at least two distinct, non-empty strings.
func choices(s *jsonschema.Schema) {
	s.Type, s.Types = "array", nil
	s.Items.MinLength, s.MinItems, s.UniqueItems = jsonschema.Ptr(1), jsonschema.Ptr(2), true
}

func nonEmpty(s *jsonschema.Schema) { s.MinLength = jsonschema.Ptr(1) }

// readOnly annotates the tools that only ask a model.
var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: jsonschema.Ptr(false)}

// ask runs one sampling request of a call with the sampler who picked: a
// user turn, and an answer that validates against schema, or plain text
// when schema is nil. Corrective retries are reported as progress.
func (s *Server) ask(ctx context.Context, c *call, system, user string, schema json.RawMessage) (*sampler.Result, error) {
	p := &sampler.Params{Request: sampler.Request{
		Messages:     []sampler.Message{sampler.UserMessage(sampler.TextBlock(user))},
		SystemPrompt: system,
		MaxTokens:    c.svc.DefaultMaxTokens(),
		Schema:       schema,
	}, OnRetry: c.retry}
	if schema == nil {
		return c.svc.Sample(ctx, p)
	}
	return c.svc.SampleSchema(ctx, p)
}

// shaped asks for an answer valid for schema and decodes it.
func shaped[Out any](ctx context.Context, s *Server, c *call, system, user string, schema json.RawMessage) (Out, error) {
	var out Out
	res, err := s.ask(ctx, c, system, user, schema)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(res.Parsed, &out); err != nil {
		return out, &toolError{outcome: outcomeFailed, text: "decode the answer: " + err.Error()}
	}
	return out, nil
}

// section renders a labelled part of a prompt, or nothing when empty.
func section(label, text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	return "\n\n" + label + ":\n" + text
}

// bullets renders items one per line, each after a dash.
func bullets(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return "- " + strings.Join(items, "\n- ")
}

const systemPrefix = "You are a careful assistant answering one request of a program. "

type decideIn struct {
	Question string   `json:"question" jsonschema:"The decision to make."`
	Options  []string `json:"options,omitempty" jsonschema:"The choices; without them the answer is yes or no."`
	Context  string   `json:"context,omitempty" jsonschema:"What the decision depends on."`
}

type decideOut struct {
	Choice     string  `json:"choice" jsonschema:"One of the options (or yes/no)."`
	Reasoning  string  `json:"reasoning" jsonschema:"Why."`
	Confidence float64 `json:"confidence"`
}

func (s *Server) addDecide() {
	out := schemaOf[decideOut](func(p props) { p["confidence"] = score() })
	add(s, &mcp.Tool{Name: "agent_decide", Title: "Decide", Annotations: readOnly,
		Description: "Make a decision: choose one of the options (yes or no when none are given), with reasoning and a confidence in [0,1].",
		InputSchema: schemaOf[decideIn](func(p props) { nonEmpty(p["question"]); choices(p["options"]) }), OutputSchema: out,
	}, false, func(ctx context.Context, c *call, in decideIn) (decideOut, error) {
		options := in.Options
		if len(options) == 0 {
			options = []string{"yes", "no"}
		}
		return shaped[decideOut](ctx, s, c,
			systemPrefix+"Make the decision asked for. Choose exactly one of the options, explain briefly, and give your confidence between 0 and 1.",
			"Question: "+in.Question+section("Options", bullets(options))+section("Context", in.Context),
			narrow(out, func(p props) { p["choice"].Enum = enum(options) }))
	})
}

type analyzeIn struct {
	Data  json.RawMessage `json:"data" jsonschema:"What to analyze: text, or any JSON value."`
	Focus string          `json:"focus,omitempty" jsonschema:"What the analysis should concentrate on."`
}

type analyzeOut struct {
	Summary         string   `json:"summary"`
	Findings        []string `json:"findings" jsonschema:"What the data shows."`
	Risks           []string `json:"risks" jsonschema:"Problems or dangers."`
	Recommendations []string `json:"recommendations" jsonschema:"What to do."`
}

func (s *Server) addAnalyze() {
	out := schemaOf[analyzeOut](nil)
	schema, _ := json.Marshal(out)
	add(s, &mcp.Tool{Name: "agent_analyze", Title: "Analyze", Annotations: readOnly,
		Description: "Analyze data: a summary, findings, risks and recommendations.",
		InputSchema: schemaOf[analyzeIn](nil), OutputSchema: out,
	}, false, func(ctx context.Context, c *call, in analyzeIn) (analyzeOut, error) {
		data := string(in.Data)
		var text string
		if json.Unmarshal(in.Data, &text) == nil {
			data = text
		}
		return shaped[analyzeOut](ctx, s, c, systemPrefix+"Analyze the data: summarize it, list findings, risks and recommendations.",
			"Data:\n"+data+section("Focus", in.Focus), schema)
	})
}

type extractIn struct {
	Text   string          `json:"text" jsonschema:"The text to extract from."`
	Schema json.RawMessage `json:"schema" jsonschema:"A JSON Schema the extracted value must validate against."`
}

type extractOut struct {
	Value json.RawMessage `json:"value" jsonschema:"The extracted value; it validates against the given schema."`
}

func (s *Server) addExtract() {
	add(s, &mcp.Tool{Name: "agent_extract", Title: "Extract", Annotations: readOnly,
		Description:  "Extract a value from text that validates against the given JSON Schema; the answer is validated and corrected until it does.",
		InputSchema:  schemaOf[extractIn](func(p props) { nonEmpty(p["text"]); p["schema"].Type = "object" }),
		OutputSchema: schemaOf[extractOut](nil),
	}, false, func(ctx context.Context, c *call, in extractIn) (extractOut, error) {
		// The schema is the caller's: an invalid one is refused naming its paths.
		res, err := s.ask(ctx, c, systemPrefix+"Extract from the text the value the JSON Schema describes. Use only what the text says.",
			"Text:\n"+in.Text, in.Schema)
		if err != nil {
			return extractOut{}, err
		}
		return extractOut{Value: res.Parsed}, nil
	})
}

type classifyIn struct {
	Text       string   `json:"text" jsonschema:"The text to classify."`
	Categories []string `json:"categories"`
	MultiLabel bool     `json:"multiLabel,omitempty" jsonschema:"Allow more than one label (default false)."`
}

type classifyOut struct {
	Labels []string           `json:"labels" jsonschema:"The chosen categories."`
	Scores map[string]float64 `json:"scores" jsonschema:"A score in [0,1] per category."`
}

func (s *Server) addClassify() {
	out := schemaOf[classifyOut](func(p props) { p["scores"].AdditionalProperties = score() })
	add(s, &mcp.Tool{Name: "agent_classify", Title: "Classify", Annotations: readOnly,
		Description: "Classify text into the given categories (one label, or several with multiLabel), with a score per category.",
		InputSchema: schemaOf[classifyIn](func(p props) { nonEmpty(p["text"]); choices(p["categories"]) }), OutputSchema: out,
	}, false, func(ctx context.Context, c *call, in classifyIn) (classifyOut, error) {
		rule := "Choose exactly one label."
		if in.MultiLabel {
			rule = "Choose every label that applies (at least one)."
		}
		return shaped[classifyOut](ctx, s, c,
			systemPrefix+"Classify the text into the categories. "+rule+" Score every category between 0 and 1.",
			"Text:\n"+in.Text+section("Categories", bullets(in.Categories)),
			narrow(out, func(p props) {
				labels := p["labels"]
				labels.Items.Enum, labels.MinItems, labels.UniqueItems = enum(in.Categories), jsonschema.Ptr(1), true
				if !in.MultiLabel {
					labels.MaxItems = jsonschema.Ptr(1)
				}
				scores := p["scores"]
				scores.Properties, scores.Required = props{}, in.Categories
				scores.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
				for _, c := range in.Categories {
					scores.Properties[c] = score()
				}
			}))
	})
}

type summarizeIn struct {
	Text     string `json:"text" jsonschema:"The text to summarize."`
	MaxWords int    `json:"maxWords,omitempty" jsonschema:"The summary's length limit in words."`
	Style    string `json:"style,omitempty" jsonschema:"How to write it, e.g. neutral, executive, bullet-like."`
}

type summarizeOut struct {
	Summary   string   `json:"summary"`
	KeyPoints []string `json:"keyPoints" jsonschema:"The main points."`
}

func (s *Server) addSummarize() {
	out := schemaOf[summarizeOut](nil)
	schema, _ := json.Marshal(out)
	add(s, &mcp.Tool{Name: "agent_summarize", Title: "Summarize", Annotations: readOnly,
		Description: "Summarize text: a summary (within maxWords when given) and its key points.",
		InputSchema: schemaOf[summarizeIn](func(p props) {
			nonEmpty(p["text"])
			p["maxWords"].Minimum, p["maxWords"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(2000.0)
		}), OutputSchema: out,
	}, false, func(ctx context.Context, c *call, in summarizeIn) (summarizeOut, error) {
		system := systemPrefix + "Summarize the text and list its key points."
		if in.MaxWords > 0 {
			system += fmt.Sprintf(" The summary has at most %d words.", in.MaxWords)
		}
		if in.Style != "" {
			system += " Style: " + in.Style + "."
		}
		res, err := shaped[summarizeOut](ctx, s, c, system, "Text:\n"+in.Text, schema)
		if words := strings.Fields(res.Summary); err == nil && in.MaxWords > 0 && len(words) > in.MaxWords {
			// The limit holds whatever the model wrote.
			res.Summary = strings.Join(words[:in.MaxWords], " ") + " …"
		}
		return res, err
	})
}

// Formats of agent_generate.
const (
	formatText     = "text"
	formatMarkdown = "markdown"
	formatCode     = "code"
	formatJSON     = "json"
)

var formats = enum([]string{formatText, formatMarkdown, formatCode, formatJSON})

type generateIn struct {
	Instructions string          `json:"instructions" jsonschema:"What to write."`
	Format       string          `json:"format,omitempty" jsonschema:"Default text; json when schema is given."`
	Language     string          `json:"language,omitempty" jsonschema:"The programming language (code) or natural language to write in."`
	Schema       json.RawMessage `json:"schema,omitempty" jsonschema:"A JSON Schema the content must validate against (format json)."`
}

type generateOut struct {
	Content any    `json:"content" jsonschema:"The text, or with format json the JSON value."`
	Format  string `json:"format"`
}

func (s *Server) addGenerate() {
	add(s, &mcp.Tool{Name: "agent_generate", Title: "Generate", Annotations: readOnly,
		Description: "Generate content: text, markdown, code, or a JSON value (validated against schema when given).",
		InputSchema: schemaOf[generateIn](func(p props) {
			nonEmpty(p["instructions"])
			p["format"].Enum, p["schema"].Type = formats, "object"
		}),
		OutputSchema: schemaOf[generateOut](func(p props) { p["format"].Enum = formats }),
	}, false, func(ctx context.Context, c *call, in generateIn) (generateOut, error) {
		out := generateOut{Format: in.Format}
		switch {
		case out.Format == "" && in.Schema != nil:
			out.Format = formatJSON
		case out.Format == "":
			out.Format = formatText
		case out.Format != formatJSON && in.Schema != nil:
			return out, &toolError{outcome: outcomeInvalidArgs, text: "invalid arguments:\n- /schema: schema needs format json"}
		}
		system := systemPrefix + "Write what the instructions ask for, and nothing else."
		if in.Language != "" {
			system += " Language: " + in.Language + "."
		}
		var schema json.RawMessage
		switch out.Format {
		case formatJSON:
			if schema = in.Schema; schema == nil {
				schema = json.RawMessage("{}")
			}
		case formatCode:
			system += " Answer with the code only, without a Markdown fence."
		case formatMarkdown:
			system += " Use Markdown."
		}
		res, err := s.ask(ctx, c, system, in.Instructions, schema)
		switch {
		case err != nil:
			return out, err
		case schema != nil:
			out.Content = res.Parsed
		case out.Format == formatCode:
			out.Content = unfence(res.Text)
		default:
			out.Content = res.Text
		}
		return out, nil
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

type compareIn struct {
	Options  []string `json:"options" jsonschema:"What to compare."`
	Criteria []string `json:"criteria,omitempty" jsonschema:"What to compare them by."`
	Context  string   `json:"context,omitempty" jsonschema:"What the comparison is for."`
}

type compareOut struct {
	Ranking   []string `json:"ranking" jsonschema:"Every option, best first."`
	Best      string   `json:"best"`
	Rationale string   `json:"rationale"`
}

func (s *Server) addCompare() {
	out := schemaOf[compareOut](nil)
	add(s, &mcp.Tool{Name: "agent_compare", Title: "Compare", Annotations: readOnly,
		Description: "Compare options: rank them all, best first, name the best and give the rationale.",
		InputSchema: schemaOf[compareIn](func(p props) { choices(p["options"]) }), OutputSchema: out,
	}, false, func(ctx context.Context, c *call, in compareIn) (compareOut, error) {
		return shaped[compareOut](ctx, s, c,
			systemPrefix+"Compare the options. Rank every option exactly once, best first; best is the first of the ranking.",
			"Options:\n"+bullets(in.Options)+section("Criteria", bullets(in.Criteria))+section("Context", in.Context),
			narrow(out, func(p props) {
				n := jsonschema.Ptr(len(in.Options))
				ranking := p["ranking"]
				ranking.Items.Enum, ranking.MinItems, ranking.MaxItems, ranking.UniqueItems = enum(in.Options), n, n, true
				p["best"].Enum = enum(in.Options)
			}))
	})
}

// The schemas of the sample tool: the domain's MCP types read and write
// content as one block or an array, which their Go types cannot say.
const (
	sampleBlock = `{"type":"object","properties":{"type":{"type":"string"}},"required":["type"]}`
	sampleInput = `{"type":"object","description":"The params of MCP's sampling/createMessage (revision 2025-11-25).","required":["messages","maxTokens"],"properties":{` +
		`"messages":{"type":"array","minItems":1,"items":{"type":"object","required":["role","content"],"properties":{"role":{"type":"string","enum":["user","assistant"]},` +
		`"content":{"anyOf":[` + sampleBlock + `,{"type":"array","items":` + sampleBlock + `}]}}}},` +
		`"maxTokens":{"type":"integer","minimum":1},"systemPrompt":{"type":"string"},"temperature":{"type":"number","minimum":0,"maximum":2},` +
		`"stopSequences":{"type":"array","items":{"type":"string"}},"modelPreferences":{"type":"object"},"metadata":{"type":"object"},` +
		`"includeContext":{"type":"string","enum":["none","thisServer","allServers"]},` +
		`"tools":{"type":"array","items":{"type":"object","required":["name","inputSchema"],"properties":{"name":{"type":"string","minLength":1},"description":{"type":"string"},"inputSchema":{"type":"object"}}}},` +
		`"toolChoice":{"type":"object","properties":{"mode":{"type":"string","enum":["auto","required","none"]}}}}}`
	sampleOutput = `{"type":"object","required":["role","content","model"],"additionalProperties":false,"properties":{` +
		`"role":{"type":"string","enum":["assistant"]},"content":{"anyOf":[` + sampleBlock + `,{"type":"array","items":` + sampleBlock + `}]},` +
		`"model":{"type":"string"},"stopReason":{"type":"string"}}}`
)

// addSample adds MCP's sampling/createMessage as a tool, for hosts that
// cannot sample themselves: the params of the request in, its result out.
func (s *Server) addSample() {
	add(s, &mcp.Tool{Name: "sample", Title: "Sample", Annotations: readOnly,
		Description: "MCP's sampling/createMessage as a tool: the request's params in, a CreateMessageResult out (tool_use blocks when tools are given).",
		InputSchema: json.RawMessage(sampleInput), OutputSchema: json.RawMessage(sampleOutput),
	}, false, func(ctx context.Context, c *call, in sampler.CreateMessageParams) (*sampler.CreateMessageResult, error) {
		p, err := in.Params()
		if err != nil {
			return nil, err
		}
		p.OnRetry = c.retry
		res, err := c.svc.Sample(ctx, p)
		if err != nil {
			return nil, err
		}
		out := sampler.CreateMessageResultOf(res)
		return &out, nil
	})
}
