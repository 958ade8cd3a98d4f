package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/sampler"
)

const corpusPrompt = "Summarize the weather report for Paris, France in a few words."

// mustValidate fails t unless instance (JSON text) is valid against schema,
// compiled and checked as the service does, in a cache of the test's own.
func mustValidate(t *testing.T, schema, instance []byte) {
	t.Helper()
	s, err := sampler.NewSchemaCache(1).Compile(schema, "/schema")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	if !json.Valid(instance) {
		t.Fatalf("output is not JSON: %s", instance)
	}
	if errs := s.Validate(instance); errs != nil {
		t.Errorf("output does not validate:\n%s\nerrors: %v", instance, errs)
	}
}

// value generates a value for schema as a schema answer does; ok reports
// whether the generator found it valid.
func value(t *testing.T, schema, seed string) (got string, ok bool) {
	t.Helper()
	compiled, err := sampler.NewSchemaCache(1).Compile(json.RawMessage(schema), "/schema")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	v, ok, err := generate(context.Background(), compiled, json.RawMessage(schema), seed, false)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	return string(v), ok
}

func schemaRequest(model string, schema []byte, prompt string) *sampler.Request {
	return &sampler.Request{
		Model:    model,
		Messages: []sampler.Message{{Role: sampler.RoleUser, Content: []sampler.Content{sampler.TextBlock(prompt)}}},
		Schema:   schema,
	}
}

func TestSchemaCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "schemas", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("corpus has %d schemas, want at least 30", len(files))
	}
	p := New(nil)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			schema, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Sample(context.Background(), schemaRequest("default", schema, corpusPrompt))
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if len(resp.Content) != 1 || resp.Content[0].Type != sampler.BlockText {
				t.Fatalf("content = %+v, want one text block", resp.Content)
			}
			if resp.StopReason != sampler.StopEndTurn {
				t.Errorf("stop reason = %q, want %q", resp.StopReason, sampler.StopEndTurn)
			}
			mustValidate(t, schema, []byte(resp.Content[0].Text))

			again, err := p.Sample(context.Background(), schemaRequest("default", schema, corpusPrompt))
			if err != nil {
				t.Fatalf("second Sample: %v", err)
			}
			if diff := cmp.Diff(resp, again); diff != "" {
				t.Errorf("second call differs (-first +second):\n%s", diff)
			}
		})
	}
}

func TestGenerate(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		seed   string
		want   string
	}{
		{"string root is the seed", `{"type":"string"}`, "hello there", `"hello there"`},
		{"date-time", `{"type":"string","format":"date-time"}`, "", `"2025-01-01T00:00:00Z"`},
		{"date", `{"type":"string","format":"date"}`, "", `"2025-01-01"`},
		{"email", `{"type":"string","format":"email"}`, "", `"user@example.com"`},
		{"enum picks first", `{"enum":["b","a"]}`, "", `"b"`},
		{"enum skips members failing siblings", `{"type":"integer","enum":["x",2]}`, "", `2`},
		{"const", `{"const":{"k":[1,2]}}`, "", `{"k":[1,2]}`},
		{"examples first", `{"type":"string","examples":["Paris","Lyon"],"default":"Nice"}`, "", `"Paris"`},
		{"default without examples", `{"type":"integer","default":7}`, "", `7`},
		{"invalid example is skipped", `{"type":"integer","minimum":5,"examples":[1]}`, "", `5`},
		{"integer exclusive bounds", `{"type":"integer","exclusiveMinimum":5,"exclusiveMaximum":7}`, "", `6`},
		{"number exclusive minimum zero", `{"type":"number","exclusiveMinimum":0}`, "", `0.5`},
		{"number between exclusive bounds", `{"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1.5}`, "", `1.125`},
		{"number in a narrow range", `{"type":"number","minimum":1.1,"maximum":1.2}`, "", `1.1`},
		{"number in a one-point range", `{"type":"number","minimum":1.3,"maximum":1.3}`, "", `1.3`},
		{"number variants are not all integers", `{"type":"array","items":{"type":"number"},"minItems":3,"uniqueItems":true}`, "", `[0,0.5,1]`},
		{"decimal multipleOf", `{"type":"number","multipleOf":0.01,"minimum":0.005}`, "", `0.01`},
		{"integer multipleOf with bounds", `{"type":"integer","multipleOf":5,"minimum":7}`, "", `10`},
		{"allOf multipleOf lcm", `{"type":"integer","minimum":1,"allOf":[{"multipleOf":4},{"multipleOf":6}]}`, "", `12`},
		{"maximum below zero", `{"type":"integer","maximum":-3}`, "", `-3`},
		{"type array first non-null", `{"type":["null","boolean"]}`, "", `true`},
		{"only null", `{"type":"null"}`, "", `null`},
		{"boolean schema true", `true`, "", `"offline sample text"`},
		{"untyped with properties is an object", `{"properties":{"a":{"type":"integer"}}}`, "", `{"a":0}`},
		{"optional properties included in order", `{"type":"object","properties":{"z":{"type":"boolean"},"a":{"type":"integer"}},"required":["a"]}`, "", `{"z":true,"a":0}`},
		{"false property left out", `{"type":"object","properties":{"a":false,"b":{"type":"null"}}}`, "", `{"b":null}`},
		{"name takes seed words", `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`, "Ada Lovelace wrote notes", `{"name":"Ada Lovelace wrote notes"}`},
		{"city takes proper name", `{"type":"object","properties":{"city":{"type":"string"}}}`, "What is the weather in Paris?", `{"city":"Paris"}`},
		{"maxLength cuts seed", `{"type":"string","maxLength":5}`, "hello there", `"hello"`},
		{"minLength pads", `{"type":"string","minLength":12}`, "hi", `"hi lorem ips"`},
		{"pattern", `{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"}`, "", `"AAA-0000"`},
		{"pattern matched by a seed word", `{"type":"string","pattern":"^[A-Z][a-z]+$"}`, "weather in Paris", `"Paris"`},
		{"unique strings", `{"type":"array","items":{"type":"string"},"minItems":3,"uniqueItems":true}`, "alpha", `["alpha","alpha 2","alpha 3"]`},
		{"unique enum items", `{"type":"array","items":{"enum":["a","b"]},"minItems":2,"uniqueItems":true}`, "", `["a","b"]`},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string","format":"date"}],"items":false}`, "", `[0,"2025-01-01"]`},
		{"oneOf picks an exclusive value", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, "", `0.5`},
		{"anyOf falls to a satisfiable branch", `{"anyOf":[{"type":"integer","minimum":3,"maximum":2},{"type":"boolean"}]}`, "", `true`},
		{"not", `{"type":"integer","not":{"const":0}}`, "", `1`},
		{"recursive ref stops", `{"type":"object","properties":{"next":{"$ref":"#"}}}`, "", `{"next":{"next":{"next":{"next":{"next":{}}}}}}`},
		{"ref into properties", `{"type":"object","properties":{"a":{"type":"integer","minimum":3},"b":{"$ref":"#/properties/a"}},"required":["b"]}`, "", `{"a":3,"b":3}`},
		{"ref with an escaped name", `{"$defs":{"a/b~c":{"const":1}},"$ref":"#/$defs/a~1b~0c"}`, "", `1`},
		{"ref into prefixItems", `{"type":"array","prefixItems":[{"type":"boolean"},{"$ref":"#/prefixItems/0"}],"minItems":2}`, "", `[true,true]`},
		{"ref to an anchor", `{"$defs":{"n":{"$anchor":"num","type":"integer","minimum":7}},"$ref":"#num"}`, "", `7`},
		{"optional member the validator refuses is left out", `{"type":"object","properties":{"a":{"type":"integer","not":{"type":"integer"}},"b":{"type":"boolean"}},"required":["b"]}`, "", `{"b":true}`},
		{"required member the validator refuses changes the branch above", `{"anyOf":[{"type":"object","properties":{"x":{"type":"integer","not":{"type":"integer"}}},"required":["x"]},{"type":"object","properties":{"y":{"type":"boolean"}},"required":["y"]}]}`, "", `{"y":true}`},
		{"if picks then", `{"type":"integer","if":{"minimum":0},"then":{"multipleOf":7,"minimum":1},"else":{"const":-1}}`, "", `7`},
		{"large integers stay exact", `{"type":"integer","minimum":12345678901234567890123}`, "", `12345678901234567890123`},
		{"const null", `{"type":["string","null"],"const":null}`, "", `null`},
		{"enum null", `{"enum":[null]}`, "", `null`},
		{"html is not escaped", `{"const":"a<b&c>d"}`, "", `"a<b&c>d"`},
		{"uuid is v4 shaped", `{"type":"string","format":"uuid"}`, "", `"` + uuidOf("", 0) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := value(t, tt.schema, tt.seed)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("generate (-want +got):\n%s", diff)
			}
			if !ok {
				t.Errorf("generate says %s does not validate", got)
			}
			mustValidate(t, []byte(tt.schema), []byte(got))
		})
	}
}

func TestUUIDShape(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, v := range []int{0, 1, 2, 99} {
		if u := uuidOf("seed", v); !v4.MatchString(u) {
			t.Errorf("uuidOf(seed, %d) = %q, want a version 4 UUID", v, u)
		}
	}
}

// TestUnsatisfiable: for a schema no value satisfies, generate gives up
// within its bounds and says so.
func TestUnsatisfiable(t *testing.T) {
	tests := []struct{ name, schema string }{
		{"false schema", `false`},
		{"empty integer range", `{"type":"integer","minimum":5,"maximum":4}`},
		{"conflicting types", `{"allOf":[{"type":"string"},{"type":"integer"}]}`},
		{"impossible uniqueness", `{"type":"array","items":{"enum":[1,2]},"minItems":3,"uniqueItems":true}`},
		{"not everything", `{"not":{}}`},
		{"required recursion", `{"type":"object","required":["a"],"properties":{"a":{"$ref":"#"}}}`},
		{"huge minItems", `{"type":"array","minItems":1000000}`},
		{"pattern longer than the generator builds", `{"type":"string","pattern":"^a{1000}b{1000}c{1000}d{1000}e{1000}$"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := value(t, tt.schema, "seed")
			if ok {
				t.Errorf("generate = %.100s, valid; want a failure", got)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("generate = %.100s, not JSON", got)
			}
		})
	}
}

func TestGenerateSeedVariesStrings(t *testing.T) {
	schema := `{"type":"object","properties":{"title":{"type":"string"},"id":{"type":"string","format":"uuid"}},"required":["title","id"]}`
	a, _ := value(t, schema, "first prompt about cats")
	b, _ := value(t, schema, "second prompt about dogs")
	if a == b {
		t.Errorf("different seeds gave the same value %s", a)
	}
	if diff := cmp.Diff(a, func() string { v, _ := value(t, schema, "first prompt about cats"); return v }()); diff != "" {
		t.Errorf("same seed differs (-first +second):\n%s", diff)
	}
}

// TestGenerateBoundedOnHostileSchemas: recursive and wide schemas end in a
// valid value.
func TestGenerateBoundedOnHostileSchemas(t *testing.T) {
	wide := func(member string) string {
		parts := make([]string, 12)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"p%d":%s`, i, member)
		}
		return `{"type":"object","properties":{` + strings.Join(parts, ",") + `}}`
	}
	tests := []struct{ name, schema string }{
		{"self reference", `{"$ref":"#"}`},
		{"allOf self reference", `{"allOf":[{"$ref":"#"}]}`},
		{"wide optional recursion", wide(`{"$ref":"#"}`)},
		{"wide array recursion", wide(`{"type":"array","items":{"$ref":"#"},"minItems":2}`)},
		{"required recursion with a null way out", `{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#"},{"type":"null"}]},"b":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["a","b"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := value(t, tt.schema, "seed")
			if !ok {
				t.Errorf("generate = %.100s, not valid", got)
			}
			mustValidate(t, []byte(tt.schema), []byte(got))
		})
	}
}

// TestGenerateBoundsItsOutput: strings stop at textLimit bytes, whatever
// minItems and minLength ask.
func TestGenerateBoundsItsOutput(t *testing.T) {
	got, ok := value(t, `{"type":"array","minItems":10000,"items":{"type":"string","minLength":100000}}`, "seed")
	if ok || len(got) > 2*textLimit {
		t.Errorf("generate = %d bytes, valid %v; want at most %d bytes, not valid", len(got), ok, 2*textLimit)
	}
}

// TestGenerateCancelled: a cancelled request stops generation.
func TestGenerateCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	compiled, err := sampler.NewSchemaCache(1).Compile(json.RawMessage(`{}`), "/schema")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := generate(ctx, compiled, json.RawMessage(`{}`), "", false); !errors.Is(err, context.Canceled) {
		t.Errorf("generate error = %v, want context.Canceled", err)
	}
}
