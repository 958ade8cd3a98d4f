package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kaptinlin/jsonpointer"
)

// schema is one subschema as the generator reads it: the keywords it builds
// values from, decoded by encoding/json. Keywords it does not read (not,
// propertyNames, dependentSchemas, …) are left to the validator, which
// judges every generated value.
type schema struct {
	// never marks the boolean schema false; true decodes as an empty schema.
	never bool

	ID            string             `json:"$id"`
	Anchor        string             `json:"$anchor"`
	DynamicAnchor string             `json:"$dynamicAnchor"`
	Ref           string             `json:"$ref"`
	DynamicRef    string             `json:"$dynamicRef"`
	Defs          map[string]*schema `json:"$defs"`
	Definitions   map[string]*schema `json:"definitions"`

	Type     any               `json:"type"` // a type name or a list of them
	Const    json.RawMessage   `json:"const"`
	Enum     []json.RawMessage `json:"enum"`
	Examples []json.RawMessage `json:"examples"`
	Default  json.RawMessage   `json:"default"`

	// Numbers only: the service accepts no boolean exclusiveMinimum (draft 4).
	Minimum          json.Number `json:"minimum"`
	Maximum          json.Number `json:"maximum"`
	ExclusiveMinimum json.Number `json:"exclusiveMinimum"`
	ExclusiveMaximum json.Number `json:"exclusiveMaximum"`
	MultipleOf       json.Number `json:"multipleOf"`

	MinLength *int   `json:"minLength"`
	MaxLength *int   `json:"maxLength"`
	Pattern   string `json:"pattern"`
	Format    string `json:"format"`

	// The service accepts no tuple form of items (drafts before 2020-12).
	PrefixItems []*schema `json:"prefixItems"`
	Items       *schema   `json:"items"`
	MinItems    *int      `json:"minItems"`
	MaxItems    *int      `json:"maxItems"`
	UniqueItems bool      `json:"uniqueItems"`
	Contains    *schema   `json:"contains"`

	Properties           members             `json:"properties"`
	PatternProperties    members             `json:"patternProperties"`
	AdditionalProperties *schema             `json:"additionalProperties"`
	Required             []string            `json:"required"`
	MinProperties        *int                `json:"minProperties"`
	MaxProperties        *int                `json:"maxProperties"`
	DependentRequired    map[string][]string `json:"dependentRequired"`
	// Dependencies (draft 7) holds lists of names or schemas; the lists
	// count as dependentRequired.
	Dependencies map[string]json.RawMessage `json:"dependencies"`

	AllOf []*schema `json:"allOf"`
	AnyOf []*schema `json:"anyOf"`
	OneOf []*schema `json:"oneOf"`
	If    *schema   `json:"if"`
	Then  *schema   `json:"then"`
	Else  *schema   `json:"else"`
}

// UnmarshalJSON decodes a schema object or a boolean schema.
func (s *schema) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*s = schema{}
		return nil
	case "false":
		*s = schema{never: true}
		return nil
	}
	type plain schema // the fields without this method
	return json.Unmarshal(b, (*plain)(s))
}

// implied returns the type the keywords of s imply, by rank: 0 object, 1
// array, 2 string, 3 number, 4 none (the default, string). Of several, the
// lowest rank wins.
func (s *schema) implied() int {
	switch {
	case s.Properties.byName != nil || s.PatternProperties.byName != nil || s.AdditionalProperties != nil ||
		s.Required != nil || s.MinProperties != nil || s.MaxProperties != nil ||
		len(s.DependentRequired) > 0 || len(s.Dependencies) > 0:
		return 0
	case s.PrefixItems != nil || s.Items != nil || s.MinItems != nil || s.MaxItems != nil || s.UniqueItems || s.Contains != nil:
		return 1
	case s.MinLength != nil || s.MaxLength != nil || s.Pattern != "" || s.Format != "":
		return 2
	case s.Minimum != "" || s.Maximum != "" || s.ExclusiveMinimum != "" || s.ExclusiveMaximum != "" || s.MultipleOf != "":
		return 3
	}
	return 4
}

// typeNames returns the names a type keyword lists: one name or a list.
func typeNames(t any) []string {
	if name, ok := t.(string); ok {
		return []string{name}
	}
	list, _ := t.([]any)
	names := make([]string, 0, len(list))
	for _, x := range list {
		if name, ok := x.(string); ok {
			names = append(names, name)
		}
	}
	return names
}

// members is an object of subschemas (properties, patternProperties) with
// the order in which the schema declares them, which generated objects
// follow.
type members struct {
	names  []string
	byName map[string]*schema
}

// UnmarshalJSON decodes a JSON object of schemas, keeping its member
// order: encoding/json reads the names and decodes each schema.
func (m *members) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("expected an object of schemas")
	}
	m.names, m.byName = nil, map[string]*schema{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var s *schema
		if err := dec.Decode(&s); err != nil {
			return err
		}
		if _, dup := m.byName[name]; !dup {
			m.names = append(m.names, name)
		}
		m.byName[name] = s
	}
	return nil
}

// index records the names of s and of its children in g.names.
func (g *generator) index(s *schema) {
	name := func(k string) {
		if _, dup := g.names[k]; !dup {
			g.names[k] = s
		}
	}
	if id, _, _ := strings.Cut(s.ID, "#"); id != "" {
		name(id)
		name(id[strings.LastIndexByte(id, '/')+1:])
	}
	for _, a := range []string{s.Anchor, s.DynamicAnchor} {
		if a != "" {
			name("#" + a)
		}
	}
	s.children(func(_ []string, sub *schema) bool {
		g.index(sub)
		return true
	})
}

// children calls yield with each subschema the generator reads and its
// place under s as JSON Pointer tokens (["items"], ["properties", name]),
// until yield returns false.
func (s *schema) children(yield func(at []string, sub *schema) bool) {
	named := []struct {
		kw string
		m  map[string]*schema
	}{{"$defs", s.Defs}, {"definitions", s.Definitions}, {"properties", s.Properties.byName}, {"patternProperties", s.PatternProperties.byName}}
	for _, n := range named {
		for _, name := range slices.Sorted(maps.Keys(n.m)) {
			if !yield([]string{n.kw, name}, n.m[name]) {
				return
			}
		}
	}
	lists := []struct {
		kw   string
		subs []*schema
	}{{"prefixItems", s.PrefixItems}, {"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}}
	for _, l := range lists {
		for i, sub := range l.subs {
			if !yield([]string{l.kw, strconv.Itoa(i)}, sub) {
				return
			}
		}
	}
	ones := []struct {
		kw  string
		sub *schema
	}{{"items", s.Items}, {"contains", s.Contains},
		{"additionalProperties", s.AdditionalProperties}, {"if", s.If}, {"then", s.Then}, {"else", s.Else}}
	for _, o := range ones {
		if o.sub != nil && !yield([]string{o.kw}, o.sub) {
			return
		}
	}
}

// resolve returns the target of a $ref, or nil: see lookup.
func (g *generator) resolve(ref string) *schema {
	s, ok := g.refs[ref]
	if !ok {
		s = g.lookup(ref)
		g.refs[ref] = s
	}
	return s
}

// lookup finds the target of a $ref: a local JSON Pointer, an anchor or a
// subschema's $id. External references and pointers into keywords the
// generator does not read do not resolve.
func (g *generator) lookup(ref string) *schema {
	base, frag, _ := strings.Cut(strings.TrimSpace(ref), "#")
	cur := g.root
	if base != "" {
		if cur = g.names[base]; cur == nil {
			cur = g.names[base[strings.LastIndexByte(base, '/')+1:]]
		}
	}
	if cur == nil || frag == "" {
		return cur
	}
	if !strings.HasPrefix(frag, "/") {
		return g.names["#"+frag]
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	ptr, err := jsonpointer.Parse(frag)
	if err != nil {
		return nil // a malformed escape such as "~2" names nothing
	}
	toks := ptr.Tokens()
	for len(toks) > 0 && cur != nil {
		var next *schema
		cur.children(func(at []string, sub *schema) bool {
			if len(at) <= len(toks) && slices.Equal(at, toks[:len(at)]) {
				next, toks = sub, toks[len(at):]
				return false
			}
			return true
		})
		cur = next
	}
	return cur
}
