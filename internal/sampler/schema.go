package sampler

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonpointer"
	"github.com/kaptinlin/jsonschema"
)

// Schema is a compiled JSON Schema.
type Schema struct {
	s *jsonschema.Schema
}

// Validate checks a JSON document and returns its leaf errors, sorted by
// path; nil means valid.
func (s *Schema) Validate(doc json.RawMessage) []FieldError {
	res := s.s.ValidateJSON(doc)
	if res.IsValid() {
		return nil
	}
	var inst any
	_ = json.Unmarshal(doc, &inst)
	var out []FieldError
	collectLeafErrors(res, inst, "", &out)
	if len(out) == 0 {
		out = []FieldError{{Path: "/", Message: "value does not match the schema"}}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// summaryKeyword reports keywords whose error only says that a child
// failed; they are reported only when no child error explains them.
func summaryKeyword(k string) bool {
	switch k {
	case "properties", "items", "prefixItems", "$ref", "allOf", "patternProperties", "additionalProperties",
		"dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "contains":
		return true
	}
	return false
}

// collectLeafErrors gathers the most specific reasons of a failed
// evaluation. Instance locations of details are relative to their parent.
// Details about absent members are skipped: the validator evaluates a
// missing required property as null, and its "required" error already says
// what is wrong.
func collectLeafErrors(r *jsonschema.EvaluationResult, inst any, base string, out *[]FieldError) int {
	here := base + r.InstanceLocation
	added, failedChild := 0, false
	for _, d := range r.Details {
		if d.Valid {
			continue
		}
		failedChild = true
		if pointerExists(inst, here+d.InstanceLocation) {
			added += collectLeafErrors(d, inst, here, out)
		}
	}
	keys := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	path := here
	if path == "" {
		path = "/"
	}
	for _, k := range keys {
		if summaryKeyword(k) && (added > 0 || failedChild && len(keys) > 1) {
			continue
		}
		*out = append(*out, FieldError{Path: path, Message: r.Errors[k].Error()})
	}
	return added + len(keys)
}

// pointerExists reports whether a JSON Pointer names a member of v.
func pointerExists(v any, ptr string) bool {
	_, err := jsonpointer.Value(v, ptr)
	return err == nil
}

// SchemaCache compiles client-supplied JSON Schemas and keeps the most
// recently used ones, keyed by a hash of their bytes. Remote $ref loading is
// disabled. The zero value is not usable; call NewSchemaCache.
type SchemaCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *cacheEntry, most recent first
	byKey map[[32]byte]*list.Element
}

type cacheEntry struct {
	key    [32]byte
	schema *Schema
}

// NewSchemaCache returns a cache holding at most size schemas (0 means 512).
func NewSchemaCache(size int) *SchemaCache {
	if size <= 0 {
		size = 512
	}
	return &SchemaCache{size: size, order: list.New(), byKey: map[[32]byte]*list.Element{}}
}

// Compile returns the compiled schema for raw. An invalid schema gives an
// *InvalidError whose paths start with base (the schema's place in the
// request, e.g. "/schema").
func (c *SchemaCache) Compile(raw json.RawMessage, base string) (*Schema, error) {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		c.mu.Unlock()
		return el.Value.(*cacheEntry).schema, nil
	}
	c.mu.Unlock()

	s, err := compileSchema(raw, base)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		return el.Value.(*cacheEntry).schema, nil
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, schema: s})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cacheEntry).key)
	}
	return s, nil
}

func compileSchema(raw json.RawMessage, base string) (*Schema, error) {
	// Bounded before anything else: compiling a deep schema costs time
	// and memory far beyond its size.
	if len(raw) > MaxSchemaBytes {
		return nil, Invalid(base, "the schema is %d bytes; the limit is %d", len(raw), MaxSchemaBytes)
	}
	if d := JSONDepth(raw); d > MaxSchemaDepth {
		return nil, Invalid(base, "the schema nests %d levels deep; the limit is %d", d, MaxSchemaDepth)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, Invalid(base, "schema is not valid JSON")
	}
	var errs []FieldError
	checkSchema(doc, base, &errs)
	if len(errs) > 0 {
		return nil, &InvalidError{Detail: "invalid JSON Schema: " + errs[0].Path + ": " + errs[0].Message, Errors: errs}
	}
	comp := jsonschema.NewCompiler()
	// Client schemas never make the service fetch anything.
	for scheme := range comp.Loaders {
		delete(comp.Loaders, scheme)
	}
	comp.SetAssertFormat(true)
	// Known formats are asserted; unknown ones are annotations, as 2020-12
	// says, never a reason to refuse every answer.
	for name := range unknownFormats(doc) {
		comp.RegisterFormat(name, func(any) bool { return true })
	}
	s, err := comp.Compile(raw)
	if err != nil {
		return nil, Invalid(base, "invalid JSON Schema: %s", compileMessage(err))
	}
	if refs := s.UnresolvedReferenceURIs(); len(refs) > 0 {
		return nil, Invalid(base, "invalid JSON Schema: $ref %q cannot be resolved (only local references are allowed)", refs[0])
	}
	return &Schema{s: s}, nil
}

// unknownFormats returns the values of "format" keywords in doc that the
// validator does not know.
func unknownFormats(doc any) map[string]bool {
	var out map[string]bool
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if name, ok := c.(string); ok && k == "format" {
					if _, known := jsonschema.Formats[name]; !known {
						if out == nil {
							out = map[string]bool{}
						}
						out[name] = true
					}
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
	return out
}

// compileMessage keeps the library's message short and free of Go types.
func compileMessage(err error) string {
	var re *jsonschema.RegexPatternError
	if errors.As(err, &re) {
		return "pattern is not a valid regular expression"
	}
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i > 0 {
		msg = msg[:i]
	}
	return msg
}

// checkSchema checks the keywords whose wrong shape would make a schema
// meaningless. It is a structural check of JSON Schema 2020-12, not a full
// meta-schema validation: unknown keywords are allowed, as the spec allows.
func checkSchema(v any, path string, errs *[]FieldError) {
	if len(*errs) >= 20 {
		return
	}
	bad := func(p, format string, args ...any) {
		*errs = append(*errs, FieldError{Path: p, Message: fmt.Sprintf(format, args...)})
	}
	if _, ok := v.(bool); ok {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		bad(path, "a schema must be an object or a boolean")
		return
	}
	at := func(k string) string { return path + "/" + jsonpointer.EscapeToken(k) }
	validType := func(s any) bool {
		switch s {
		case "string", "number", "integer", "boolean", "object", "array", "null":
			return true
		}
		return false
	}
	if t, ok := m["type"]; ok {
		switch t := t.(type) {
		case string:
			if !validType(t) {
				bad(at("type"), "unknown type %q", t)
			}
		case []any:
			for i, x := range t {
				if !validType(x) {
					bad(fmt.Sprintf("%s/%d", at("type"), i), "unknown type %v", x)
				}
			}
		default:
			bad(at("type"), "type must be a string or an array of strings")
		}
	}
	for _, k := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"} {
		if x, ok := m[k]; ok {
			sub, ok := x.(map[string]any)
			if !ok {
				bad(at(k), "%s must be an object of schemas", k)
				continue
			}
			for name, s := range sub {
				checkSchema(s, at(k)+"/"+jsonpointer.EscapeToken(name), errs)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "additionalItems"} {
		if x, ok := m[k]; ok {
			checkSchema(x, at(k), errs)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		if x, ok := m[k]; ok {
			arr, ok := x.([]any)
			if !ok || len(arr) == 0 {
				bad(at(k), "%s must be a non-empty array of schemas", k)
				continue
			}
			for i, s := range arr {
				checkSchema(s, fmt.Sprintf("%s/%d", at(k), i), errs)
			}
		}
	}
	if x, ok := m["required"]; ok {
		arr, ok := x.([]any)
		if !ok {
			bad(at("required"), "required must be an array of strings")
		}
		for i, s := range arr {
			if _, ok := s.(string); !ok {
				bad(fmt.Sprintf("%s/%d", at("required"), i), "required entries must be strings")
			}
		}
	}
	if x, ok := m["enum"]; ok {
		if _, ok := x.([]any); !ok {
			bad(at("enum"), "enum must be an array")
		}
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} {
		if x, ok := m[k]; ok {
			n, ok := x.(json.Number)
			if !ok {
				bad(at(k), "%s must be a number", k)
				continue
			}
			if f, _ := n.Float64(); k == "multipleOf" && f <= 0 {
				bad(at(k), "multipleOf must be greater than 0")
			}
		}
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"} {
		if x, ok := m[k]; ok {
			n, ok := x.(json.Number)
			if i, err := n.Int64(); !ok || err != nil || i < 0 {
				bad(at(k), "%s must be a non-negative integer", k)
			}
		}
	}
	if x, ok := m["pattern"]; ok {
		s, ok := x.(string)
		if !ok {
			bad(at("pattern"), "pattern must be a string")
		} else if _, err := regexp.Compile(s); err != nil {
			bad(at("pattern"), "pattern is not a valid regular expression")
		}
	}
	for _, k := range []string{"$ref", "format", "$schema", "$id", "title", "description"} {
		if x, ok := m[k]; ok {
			if _, ok := x.(string); !ok {
				bad(at(k), "%s must be a string", k)
			}
		}
	}
}
