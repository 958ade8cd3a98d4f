package sampler

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestStructuredText: the structuredContent a text-only provider appends
// to a tool result, and when a text block makes it redundant.
func TestStructuredText(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Content
		want string
	}{
		{"none", Content{Content: []Content{TextBlock("ok")}}, ""},
		{"null", Content{StructuredContent: json.RawMessage(" null ")}, ""},
		{"alone, compacted", Content{StructuredContent: json.RawMessage(`{ "a": [1, 2] }`)}, `{"a":[1,2]}`},
		{"text says something else",
			Content{Content: []Content{TextBlock("22°C")}, StructuredContent: json.RawMessage(`{"t": 22}`)}, `{"t":22}`},
		{"a text block holds the same value, other spacing and key order",
			Content{Content: []Content{TextBlock("22°C"), TextBlock(`{"u":"C", "t":22}`)}, StructuredContent: json.RawMessage(`{"t": 22, "u": "C"}`)}, ""},
		{"a non-text block with the same JSON does not count",
			Content{Content: []Content{{Type: BlockResourceLink, Text: `{"t":22}`}}, StructuredContent: json.RawMessage(`{"t":22}`)}, `{"t":22}`},
		{"not JSON is passed as it is", Content{StructuredContent: json.RawMessage(`{oops`)}, `{oops`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.StructuredText(); got != tt.want {
				t.Errorf("StructuredText() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTextOf pins the text of an answer: its text blocks joined with
// newlines, other blocks left out.
func TestTextOf(t *testing.T) {
	text := func(s string) Content { return Content{Type: BlockText, Text: s} }
	call := Content{Type: BlockToolUse, ID: "c1", Name: "f", Input: []byte(`{}`)}
	for _, tt := range []struct {
		content []Content
		want    string
	}{
		{nil, ""},
		{[]Content{text("Paris")}, "Paris"},
		{[]Content{text("a"), text("b")}, "a\nb"},
		{[]Content{call}, ""},
		{[]Content{call, text("after the call")}, "after the call"},
		{[]Content{text("a"), call, text("b")}, "a\nb"},
	} {
		if got := TextOf(tt.content); got != tt.want {
			t.Errorf("TextOf(%v) = %q, want %q", tt.content, got, tt.want)
		}
	}
}

// TestUsageCostReadsAsDecimal: summed costs keep to a billionth of a
// dollar, so they read as the decimals they are.
func TestUsageCostReadsAsDecimal(t *testing.T) {
	var u Usage
	for _, c := range []float64{0.0000075, 0.000085} {
		u = u.Add(Usage{CostUSD: c})
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"inputTokens":0,"outputTokens":0,"costUsd":0.0000925}`; string(b) != want {
		t.Errorf("usage %s, want %s", b, want)
	}
}

// TestWireBlocksEncodeAsMarshalJSON: the blocks of every official example
// message, and one of each other kind, encode in their wire form exactly
// as MarshalJSON encodes them; a block with members of its own has none.
func TestWireBlocksEncodeAsMarshalJSON(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(mcpRef, "examples", "SamplingMessage", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	isErr := true
	blocks := []Content{
		TextBlock(`<"quoted" & escaped>`),
		{Type: BlockImage, Data: "aGk=", MIMEType: "image/png", Annotations: json.RawMessage(`{"priority":1}`)},
		{Type: BlockToolUse, ID: "c1", Name: "f"},
		{Type: BlockToolResult, ToolUseID: "c1", IsError: &isErr, StructuredContent: json.RawMessage(`{"a":1}`)},
		{Type: BlockResourceLink, Name: "doc", Meta: json.RawMessage(`{"k":"v"}`)},
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		blocks = append(blocks, m.Content...)
	}
	for i, c := range blocks {
		if len(c.Extra) > 0 {
			continue
		}
		want, err := json.Marshal([]Content{c})
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(WireBlocks(blocks[i : i+1]))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("block %d: wire form %s, MarshalJSON %s", i, got, want)
		}
	}
	withExtra := []Content{TextBlock("a"), {Type: BlockText, Text: "b", Extra: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}}
	if w := WireBlocks(withExtra); w != nil {
		t.Errorf("WireBlocks of a block with Extra = %v, want nil", w)
	}
}
