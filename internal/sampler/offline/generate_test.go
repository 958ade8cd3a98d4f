package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kaptinlin/jsonschema"

	"github.com/sampled/sampled/internal/sampler"
)

const corpusPrompt = "Summarize the weather report for Paris, France in a few words."

// mustValidate fails t unless instance (JSON text) is valid against schema,
// with format assertion on.
func mustValidate(t *testing.T, schema, instance []byte) {
	t.Helper()
	compiler := jsonschema.NewCompiler()
	compiler.SetAssertFormat(true)
	s, err := compiler.Compile(schema)
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	if !json.Valid(instance) {
		t.Fatalf("output is not JSON: %s", instance)
	}
	res := s.Validate(instance)
	if !res.IsValid() {
		t.Errorf("output does not validate:\n%s\nerrors: %v", instance, res.DetailedErrors())
	}
}

func schemaRequest(model string, schema []byte, prompt string, attempt int) *sampler.Request {
	return &sampler.Request{
		Model:    model,
		Messages: []sampler.Message{{Role: sampler.RoleUser, Content: []sampler.Content{sampler.TextBlock(prompt)}}},
		Schema:   schema,
		Attempt:  attempt,
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
	p := New()
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			schema, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Sample(context.Background(), schemaRequest("default", schema, corpusPrompt, 1))
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

			again, err := p.Sample(context.Background(), schemaRequest("default", schema, corpusPrompt, 1))
			if err != nil {
				t.Fatalf("second Sample: %v", err)
			}
			if diff := cmp.Diff(resp, again); diff != "" {
				t.Errorf("second call differs (-first +second):\n%s", diff)
			}

			v, err := Value(schema, corpusPrompt)
			if err != nil {
				t.Fatalf("Value: %v", err)
			}
			if diff := cmp.Diff(resp.Content[0].Text, string(v)); diff != "" {
				t.Errorf("Value differs from the schema answer (-answer +Value):\n%s", diff)
			}
		})
	}
}

func TestValue(t *testing.T) {
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
		{"number exclusive minimum zero", `{"type":"number","exclusiveMinimum":0}`, "", `1`},
		{"number between exclusive bounds", `{"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1.5}`, "", `1.25`},
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
		{"uuid is v4 shaped", `{"type":"string","format":"uuid"}`, "", `"` + uuidOf("", 0) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Value(json.RawMessage(tt.schema), tt.seed)
			if err != nil {
				t.Fatalf("Value: %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Value (-want +got):\n%s", diff)
			}
			mustValidate(t, []byte(tt.schema), got)
		})
	}
}

func TestUUIDShape(t *testing.T) {
	for _, v := range []int{0, 1, 2, 99} {
		u := uuidOf("seed", v)
		if !isUUID(u) || u[14] != '4' || !strings.ContainsRune("89ab", rune(u[19])) {
			t.Errorf("uuidOf(seed, %d) = %q, want a version 4 UUID", v, u)
		}
	}
}

func TestValueErrors(t *testing.T) {
	tests := []struct {
		name      string
		schema    string
		wantUnsat bool
	}{
		{"not JSON", `{"type":`, false},
		{"trailing data", `{} {}`, false},
		{"empty", ``, false},
		{"false schema", `false`, true},
		{"empty integer range", `{"type":"integer","minimum":5,"maximum":4}`, true},
		{"conflicting types", `{"allOf":[{"type":"string"},{"type":"integer"}]}`, true},
		{"impossible uniqueness", `{"type":"array","items":{"enum":[1,2]},"minItems":3,"uniqueItems":true}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Value(json.RawMessage(tt.schema), "")
			if err == nil {
				t.Fatalf("Value = %s, want an error", got)
			}
			if gotUnsat := errors.Is(err, ErrUnsatisfiable); gotUnsat != tt.wantUnsat {
				t.Errorf("errors.Is(%v, ErrUnsatisfiable) = %v, want %v", err, gotUnsat, tt.wantUnsat)
			}
		})
	}
}

func TestValueSeedVariesStrings(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"id":{"type":"string","format":"uuid"}},"required":["title","id"]}`)
	a, err := Value(schema, "first prompt about cats")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Value(schema, "second prompt about dogs")
	if err != nil {
		t.Fatal(err)
	}
	if string(a) == string(b) {
		t.Errorf("different seeds gave the same value %s", a)
	}
	a2, err := Value(schema, "first prompt about cats")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(a), string(a2)); diff != "" {
		t.Errorf("same seed differs (-first +second):\n%s", diff)
	}
}

func TestValueBoundedOnHostileSchemas(t *testing.T) {
	wide := func(member string) string {
		parts := make([]string, 12)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"p%d":%s`, i, member)
		}
		return `{"type":"object","properties":{` + strings.Join(parts, ",") + `}}`
	}
	tests := []struct {
		name      string
		schema    string
		wantUnsat bool
		// noCheck skips validation for schemas kaptinlin/jsonschema rejects.
		noCheck bool
	}{
		{"self reference", `{"$ref":"#"}`, false, false},
		{"allOf self reference", `{"allOf":[{"$ref":"#"}]}`, false, false},
		{"required recursion", `{"type":"object","required":["a"],"properties":{"a":{"$ref":"#"}}}`, true, false},
		{"wide optional recursion", wide(`{"$ref":"#"}`), false, false},
		{"wide array recursion", wide(`{"type":"array","items":{"$ref":"#"},"minItems":2}`), false, false},
		{"required recursion with a null way out", `{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#"},{"type":"null"}]},"b":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["a","b"]}`, false, false},
		{"huge minItems", `{"type":"array","minItems":1000000}`, true, false},
		{"pattern longer than the generator builds", `{"type":"string","pattern":"^a{1000}b{1000}c{1000}d{1000}e{1000}$"}`, true, false},
		{"huge exponent", `{"type":"integer","minimum":1e999999999}`, false, true},
		{"unresolvable reference", `{"$ref":"other.json#/nope"}`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Value(json.RawMessage(tt.schema), "seed")
			if tt.wantUnsat {
				if !errors.Is(err, ErrUnsatisfiable) {
					t.Fatalf("Value = %.100s, %v; want ErrUnsatisfiable", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Value: %v", err)
			}
			if !tt.noCheck {
				mustValidate(t, []byte(tt.schema), got)
			}
		})
	}
}
