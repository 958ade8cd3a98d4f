package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/sampler"
)

func TestCalculate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		expr    string
		want    float64
		wantErr string
	}{
		{"number", "42", 42, ""},
		{"decimal", "1.5", 1.5, ""},
		{"leading dot", ".5 + 1.", 1.5, ""},
		{"precedence", "2 + 3 * 4", 14, ""},
		{"parentheses", "2 * (3 + 4)", 14, ""},
		{"left associative", "10 - 4 - 3", 3, ""},
		{"division", "7 / 2", 3.5, ""},
		{"remainder", "10 % 4", 2, ""},
		{"remainder keeps the dividend's sign", "-7 % 3", -1, ""},
		{"power", "2 ^ 10", 1024, ""},
		{"power is right associative", "2 ^ 3 ^ 2", 512, ""},
		{"unary minus binds looser than power", "-2 ^ 2", -4, ""},
		{"negative exponent", "2 ^ -1", 0.5, ""},
		{"unary minus", "-(3 - 5)", 2, ""},
		{"double unary", "--3 + +2", 5, ""},
		{"nested", "((((1))))", 1, ""},
		{"whitespace", " \t1 +\n2 ", 3, ""},
		{"division by zero", "1 / 0", 0, "division by zero"},
		{"remainder by zero", "5 % (2 - 2)", 0, "division by zero"},
		{"empty", "  ", 0, "expression is empty"},
		{"dangling operator", "2 +", 0, "at position 4: unexpected end of expression"},
		{"two numbers", "1 2", 0, "at position 3: unexpected '2'"},
		{"letters", "abc", 0, "at position 1: want a number or (, got 'a'"},
		{"unclosed", "(1 + 2", 0, "missing )"},
		{"stray close", "1)", 0, "unexpected ')'"},
		{"two dots", "1.2.3", 0, "unexpected '.'"},
		{"overflow", "10 ^ 400", 0, "not a finite number"},
		{"too deep", strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), 0, "nested more than"},
		{"too deep unary", strings.Repeat("-", 100) + "1", 0, "nested more than"},
		{"too long", strings.Repeat("1+", 3000) + "1", 0, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := calculate(tt.expr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("calculate(%q) = %v, %v; want error containing %q", tt.expr, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("calculate(%q): %v", tt.expr, err)
			}
			if math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("calculate(%q) = %v, want %v", tt.expr, got, tt.want)
			}
		})
	}
}

func TestCountText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want textStats
	}{
		{"empty", "", textStats{}},
		{"one word", "hello", textStats{Characters: 5, Words: 1, Lines: 1, Sentences: 1}},
		{"example", "Hello world. How are you?\nFine!", textStats{Characters: 31, Words: 6, Lines: 2, Sentences: 3}},
		{"final newline ends the line", "a\nb\n", textStats{Characters: 4, Words: 2, Lines: 2, Sentences: 1}},
		{"blank lines count", "a\n\nb", textStats{Characters: 4, Words: 2, Lines: 3, Sentences: 1}},
		{"runes, not bytes", "Grüße, café!", textStats{Characters: 12, Words: 2, Lines: 1, Sentences: 1}},
		{"decimal point is no end", "Pi is 3.14 roughly. Yes", textStats{Characters: 23, Words: 5, Lines: 1, Sentences: 2}},
		{"runs of terminators", "Wait... what?! \"Really?\" OK", textStats{Characters: 27, Words: 4, Lines: 1, Sentences: 4}},
		{"punctuation alone", "... !", textStats{Characters: 5, Words: 2, Lines: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, countText(tt.text)); diff != "" {
				t.Errorf("countText(%q) (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

// TestStdTools calls the std tools through the registry, so that every
// call goes over the in-memory MCP transport.
func TestStdTools(t *testing.T) {
	t.Parallel()
	clock := time.Date(2024, 3, 10, 12, 30, 0, 0, time.UTC)
	r := start(t, Options{Now: func() time.Time { return clock }})

	ok := func(text, structured string) *Result {
		res := &Result{Content: []sampler.Content{sampler.TextBlock(text)}}
		if structured != "" {
			res.StructuredContent = json.RawMessage(structured)
		}
		return res
	}
	nowResult := func(rfc3339, zone string) *Result {
		return ok(rfc3339, fmt.Sprintf(`{"time":%q,"timezone":%q,"unix":%d}`, rfc3339, zone, clock.Unix()))
	}
	doc := `{"a":[{"b":1},{"b":[true,null]}],"x/y":{"~":"tilde"},"n":1.50}`
	tests := []struct {
		name    string
		tool    string
		args    any
		want    *Result
		wantErr string // for isError results: a part of the text
	}{
		{"calculate precedence", "std__calculate", map[string]any{"expression": "2 + 3 * 4"}, ok("14", `{"value":14}`), ""},
		{"calculate parentheses", "std__calculate", map[string]any{"expression": "2 * (3 + 4)"}, ok("14", `{"value":14}`), ""},
		{"calculate unary minus", "std__calculate", map[string]any{"expression": "-(1.5 - 4) ^ 2"}, ok("-6.25", `{"value":-6.25}`), ""},
		{"calculate division by zero", "std__calculate", map[string]any{"expression": "1 / (2 - 2)"}, nil, "division by zero"},
		{"calculate garbage", "std__calculate", map[string]any{"expression": "two plus two"}, nil, "want a number"},
		{"calculate missing expression", "std__calculate", map[string]any{}, nil, "expression is empty"},
		{"calculate wrong type", "std__calculate", map[string]any{"expression": 5}, nil, "invalid arguments"},

		{"now UTC by default", "std__now", map[string]any{}, nowResult("2024-03-10T12:30:00Z", "UTC"), ""},
		{"now in Paris", "std__now", map[string]any{"timezone": "Europe/Paris"}, nowResult("2024-03-10T13:30:00+01:00", "Europe/Paris"), ""},
		{"now in New York on DST day", "std__now", map[string]any{"timezone": "America/New_York"}, nowResult("2024-03-10T08:30:00-04:00", "America/New_York"), ""},
		{"now bad zone", "std__now", map[string]any{"timezone": "Mars/Olympus_Mons"}, nil, `unknown time zone "Mars/Olympus_Mons"`},
		{"now Local is refused", "std__now", map[string]any{"timezone": "Local"}, nil, "unknown time zone"},
		{"now path is refused", "std__now", map[string]any{"timezone": "../../etc/passwd"}, nil, "unknown time zone"},

		{"json_query pointer", "std__json_query", map[string]any{"document": doc, "path": "/a/1/b/0"}, ok("true", `{"value":true}`), ""},
		{"json_query dotted", "std__json_query", map[string]any{"document": doc, "path": "a.0.b"}, ok("1", `{"value":1}`), ""},
		{"json_query escaped pointer", "std__json_query", map[string]any{"document": doc, "path": "/x~1y/~0"}, ok(`"tilde"`, `{"value":"tilde"}`), ""},
		{"json_query null value", "std__json_query", map[string]any{"document": doc, "path": "/a/1/b/1"}, ok("null", `{"value":null}`), ""},
		{"json_query whole document", "std__json_query", map[string]any{"document": `{ "k" : [1, 2] }`, "path": ""}, ok(`{"k":[1,2]}`, `{"value":{"k":[1,2]}}`), ""},
		{"json_query document as a value", "std__json_query", map[string]any{"document": map[string]any{"a": []any{"x", "y"}}, "path": "a.1"}, ok(`"y"`, `{"value":"y"}`), ""},
		{"json_query keeps number text", "std__json_query", map[string]any{"document": doc, "path": "n"}, ok("1.50", `{"value":1.5}`), ""},
		{"json_query missing member", "std__json_query", map[string]any{"document": doc, "path": "/a/0/c"}, nil, `no value at /a/0/c: the object has no member "c"`},
		{"json_query index out of range", "std__json_query", map[string]any{"document": doc, "path": "a.5"}, nil, "no value at /a/5: the array has 2 elements"},
		{"json_query bad index", "std__json_query", map[string]any{"document": doc, "path": "/a/01"}, nil, "not an array index"},
		{"json_query into a scalar", "std__json_query", map[string]any{"document": doc, "path": "n.x"}, nil, "/n is not an object or array"},
		{"json_query string that is not JSON", "std__json_query", map[string]any{"document": "{not json", "path": ""}, nil, "not JSON text"},
		{"json_query no document", "std__json_query", map[string]any{"path": "a"}, nil, "document is required"},

		{"text_stats", "std__text_stats", map[string]any{"text": "Hello world. How are you?\nFine!"},
			ok("characters: 31, words: 6, lines: 2, sentences: 3", `{"characters":31,"lines":2,"sentences":3,"words":6}`), ""},
		{"text_stats empty", "std__text_stats", map[string]any{"text": ""},
			ok("characters: 0, words: 0, lines: 0, sentences: 0", `{"characters":0,"lines":0,"sentences":0,"words":0}`), ""},
		{"text_stats no text", "std__text_stats", map[string]any{}, nil, "text is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustCall(t, r, tt.tool, tt.args)
			if tt.wantErr != "" {
				if !got.IsError || !strings.Contains(sampler.TextOf(got.Content), tt.wantErr) {
					t.Fatalf("got %+v, want an isError result containing %q", got, tt.wantErr)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestStdSchemas checks that every std tool is listed with a description
// and an input schema carrying examples.
func TestStdSchemas(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	var names []string
	for _, tool := range r.Tools() {
		names = append(names, tool.Name)
		if tool.Server != StdServer || tool.Description == "" {
			t.Errorf("%s: server %q, description %q", tool.Name, tool.Server, tool.Description)
		}
		var schema struct {
			Type       string `json:"type"`
			Examples   []any  `json:"examples"`
			Properties map[string]struct {
				Description string `json:"description"`
				Examples    []any  `json:"examples"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if schema.Type != "object" || len(schema.Examples) == 0 || len(schema.Properties) == 0 {
			t.Errorf("%s: schema %s lacks type object, examples or properties", tool.Name, tool.InputSchema)
		}
		for p, s := range schema.Properties {
			if s.Description == "" || len(s.Examples) == 0 {
				t.Errorf("%s: property %s lacks a description or examples", tool.Name, p)
			}
		}
	}
	want := []string{"std__calculate", "std__json_query", "std__now", "std__text_stats"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ServerStatus{{Name: "std", Transport: "builtin", Connected: true, Tools: 4}}, r.Status()); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	if err := r.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
}
