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

	Type     typeList          `json:"type"`
	Const    json.RawMessage   `json:"const"`
	Enum     []json.RawMessage `json:"enum"`
	Examples []json.RawMessage `json:"examples"`
	Default  json.RawMessage   `json:"default"`

	Minimum    json.Number `json:"minimum"`
	Maximum    json.Number `json:"maximum"`
	MultipleOf json.Number `json:"multipleOf"`
	// ExclusiveMinimum and ExclusiveMaximum are numbers, or booleans
	// qualifying minimum and maximum in draft 4.
	ExclusiveMinimum json.RawMessage `json:"exclusiveMinimum"`
	ExclusiveMaximum json.RawMessage `json:"exclusiveMaximum"`

	MinLength *int   `json:"minLength"`
	MaxLength *int   `json:"maxLength"`
	Pattern   string `json:"pattern"`
	Format    string `json:"format"`

	PrefixItems []*schema `json:"prefixItems"`
	Items       items     `json:"items"`
	// AdditionalItems follows the tuple form of items (drafts before 2020-12).
	AdditionalItems *schema `json:"additionalItems"`
	MinItems        *int    `json:"minItems"`
	MaxItems        *int    `json:"maxItems"`
	UniqueItems     bool    `json:"uniqueItems"`
	Contains        *schema `json:"contains"`

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

// typeList is the type keyword: one type name or a list of them.
type typeList []string

// UnmarshalJSON decodes a type name or an array of them.
func (t *typeList) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, (*[]string)(t))
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	*t = typeList{one}
	return nil
}

// items is the items keyword: one schema for every item, or in drafts
// before 2020-12 an array of schemas for the first items (a tuple).
type items struct {
	all   *schema
	tuple []*schema
}

// UnmarshalJSON decodes a schema or an array of schemas.
func (it *items) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &it.tuple)
	}
	return json.Unmarshal(b, &it.all)
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

// get returns the member name; ok is false when the schema has none.
func (m members) get(name string) (*schema, bool) {
	s, ok := m.byName[name]
	return s, ok
}

// document is a decoded schema document with the indexes $ref needs.
type document struct {
	root    *schema
	byID    map[string]*schema
	anchors map[string]*schema
	refs    map[string]*schema // resolved $ref values; nil marks one that does not resolve
}

// decodeSchema decodes a JSON Schema document and indexes its $id and
// $anchor names.
func decodeSchema(raw json.RawMessage) (*document, error) {
	var root *schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, err
	}
	if root == nil {
		return nil, errors.New("schema is null")
	}
	d := &document{root: root, byID: map[string]*schema{}, anchors: map[string]*schema{}, refs: map[string]*schema{}}
	d.index(root, 0)
	return d, nil
}

// index records the $id, $anchor and $dynamicAnchor of s and of the
// subschemas the generator reads.
func (d *document) index(s *schema, depth int) {
	if s == nil || depth > 128 {
		return
	}
	if id, _, _ := strings.Cut(s.ID, "#"); id != "" {
		d.byID[id] = s
		if i := strings.LastIndexByte(id, '/'); i >= 0 && i < len(id)-1 {
			if _, dup := d.byID[id[i+1:]]; !dup {
				d.byID[id[i+1:]] = s
			}
		}
	}
	for _, a := range []string{s.Anchor, s.DynamicAnchor} {
		if _, dup := d.anchors[a]; a != "" && !dup {
			d.anchors[a] = s
		}
	}
	for _, sub := range s.subschemas() {
		d.index(sub, depth+1)
	}
}

// subschemas lists the subschemas of s that the generator reads, in a
// fixed order.
func (s *schema) subschemas() []*schema {
	var out []*schema
	for _, defs := range []map[string]*schema{s.Defs, s.Definitions} {
		for _, name := range slices.Sorted(maps.Keys(defs)) {
			out = append(out, defs[name])
		}
	}
	for _, m := range []members{s.Properties, s.PatternProperties} {
		for _, name := range m.names {
			out = append(out, m.byName[name])
		}
	}
	out = append(out, s.PrefixItems...)
	out = append(out, s.Items.tuple...)
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	return append(out, s.Items.all, s.AdditionalItems, s.Contains, s.AdditionalProperties, s.If, s.Then, s.Else)
}

// resolve returns the target of a $ref, or nil: see lookup.
func (d *document) resolve(ref string) *schema {
	s, ok := d.refs[ref]
	if !ok {
		s = d.lookup(ref)
		d.refs[ref] = s
	}
	return s
}

// lookup finds the target of a $ref: a local JSON Pointer, an anchor or a
// subschema's $id. External references and pointers into keywords the
// generator does not read do not resolve.
func (d *document) lookup(ref string) *schema {
	base, frag, _ := strings.Cut(strings.TrimSpace(ref), "#")
	cur := d.root
	if base != "" {
		s, ok := d.byID[base]
		if !ok {
			if i := strings.LastIndexByte(base, '/'); i >= 0 {
				s, ok = d.byID[base[i+1:]]
			}
		}
		if !ok {
			return nil
		}
		cur = s
	}
	if frag == "" {
		return cur
	}
	if !strings.HasPrefix(frag, "/") {
		return d.anchors[frag]
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	toks := strings.Split(frag[1:], "/")
	for i := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(toks[i], "~1", "/"), "~0", "~")
	}
	for len(toks) > 0 && cur != nil {
		var n int
		cur, n = cur.step(toks)
		if n == 0 {
			return nil
		}
		toks = toks[n:]
	}
	return cur
}

// step follows the first one or two tokens of a JSON Pointer from s and
// returns the subschema reached and the number of tokens used, 0 when the
// pointer leaves the keywords the generator reads.
func (s *schema) step(toks []string) (*schema, int) {
	one := map[string]*schema{"items": s.Items.all, "additionalItems": s.AdditionalItems, "contains": s.Contains,
		"additionalProperties": s.AdditionalProperties, "if": s.If, "then": s.Then, "else": s.Else}
	if sub, ok := one[toks[0]]; ok && sub != nil {
		return sub, 1
	}
	if len(toks) < 2 {
		return nil, 0
	}
	var named map[string]*schema
	switch toks[0] {
	case "$defs":
		named = s.Defs
	case "definitions":
		named = s.Definitions
	case "properties":
		named = s.Properties.byName
	case "patternProperties":
		named = s.PatternProperties.byName
	}
	if sub, ok := named[toks[1]]; ok {
		return sub, 2
	}
	list := map[string][]*schema{"prefixItems": s.PrefixItems, "items": s.Items.tuple, "allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf}[toks[0]]
	if i, err := strconv.Atoi(toks[1]); err == nil && i >= 0 && i < len(list) {
		return list[i], 2
	}
	return nil, 0
}
