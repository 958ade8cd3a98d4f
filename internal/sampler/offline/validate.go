package offline

import (
	"encoding/json"
	"math/big"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// document is a parsed JSON Schema with the indexes that $ref needs.
type document struct {
	root    any
	byID    map[string]any
	anchors map[string]any
	// patterns caches compiled regular expressions; nil marks a pattern Go
	// cannot compile, which is then treated as matching everything.
	patterns map[string]*regexp.Regexp
}

func newDocument(root any) *document {
	d := &document{
		root:     root,
		byID:     map[string]any{},
		anchors:  map[string]any{},
		patterns: map[string]*regexp.Regexp{},
	}
	d.index(root, 0)
	return d
}

// index records the $id, $anchor and $dynamicAnchor of every subschema.
func (d *document) index(n any, depth int) {
	if depth > 128 {
		return
	}
	switch t := n.(type) {
	case *object:
		if id, ok := t.vals["$id"].(string); ok {
			id, _, _ = strings.Cut(id, "#")
			if id != "" {
				d.byID[id] = t
				if i := strings.LastIndexByte(id, '/'); i >= 0 && i < len(id)-1 {
					if _, dup := d.byID[id[i+1:]]; !dup {
						d.byID[id[i+1:]] = t
					}
				}
			}
		}
		for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := t.vals[kw].(string); ok {
				if _, dup := d.anchors[a]; !dup {
					d.anchors[a] = t
				}
			}
		}
		for _, k := range t.keys {
			switch k {
			case "const", "enum", "examples", "default":
				continue // instances, not schemas
			}
			d.index(t.vals[k], depth+1)
		}
	case []any:
		for _, e := range t {
			d.index(e, depth+1)
		}
	}
}

// resolve finds the target of a $ref: a local JSON Pointer, an anchor or a
// subschema's $id. External references do not resolve.
func (d *document) resolve(ref string) (any, bool) {
	base, frag, _ := strings.Cut(strings.TrimSpace(ref), "#")
	start := d.root
	if base != "" {
		n, ok := d.byID[base]
		if !ok {
			if i := strings.LastIndexByte(base, '/'); i >= 0 {
				n, ok = d.byID[base[i+1:]]
			}
		}
		if !ok {
			return nil, false
		}
		start = n
	}
	if frag == "" {
		return start, true
	}
	if !strings.HasPrefix(frag, "/") {
		n, ok := d.anchors[frag]
		return n, ok
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	cur := start
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *object:
			v, ok := c.vals[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// regexp returns the compiled pattern, or nil when Go cannot compile it.
func (d *document) regexp(p string) *regexp.Regexp {
	re, ok := d.patterns[p]
	if !ok {
		re, _ = regexp.Compile(p)
		d.patterns[p] = re
	}
	return re
}

// matchPattern reports whether s matches p; patterns Go cannot compile match.
func (d *document) matchPattern(p, s string) bool {
	re := d.regexp(p)
	return re == nil || re.MatchString(s)
}

// validAll reports whether v satisfies every schema of nodes.
func (d *document) validAll(v any, nodes []any) bool {
	for _, n := range nodes {
		if !d.valid(v, n, 0) {
			return false
		}
	}
	return true
}

// valid is a small JSON Schema validator covering the keywords the
// generator supports. It checks candidates (examples, enum members, oneOf
// branches) before the generator commits to them. Unknown keywords are
// ignored and unresolvable references accept everything.
func (d *document) valid(v, s any, depth int) bool {
	if depth > 200 {
		return true
	}
	switch t := s.(type) {
	case bool:
		return t
	case *object:
		return d.validObject(v, t, depth)
	}
	return true
}

func (d *document) validObject(v any, o *object, depth int) bool {
	for _, kw := range []string{"$ref", "$dynamicRef"} {
		if ref, ok := o.vals[kw].(string); ok {
			if target, ok := d.resolve(ref); ok && !d.valid(v, target, depth+1) {
				return false
			}
		}
	}
	if t, ok := o.vals["type"]; ok && !typeMatches(v, t) {
		return false
	}
	if c, ok := o.vals["const"]; ok && !jsonEqual(v, c) {
		return false
	}
	if e, ok := o.vals["enum"].([]any); ok {
		found := false
		for _, m := range e {
			if jsonEqual(v, m) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	switch t := v.(type) {
	case json.Number:
		if !validNumber(t, o) {
			return false
		}
	case string:
		if !d.validString(t, o) {
			return false
		}
	case []any:
		if !d.validArray(t, o, depth) {
			return false
		}
	case *object:
		if !d.validObj(t, o, depth) {
			return false
		}
	}
	if all, ok := o.vals["allOf"].([]any); ok {
		for _, sub := range all {
			if !d.valid(v, sub, depth+1) {
				return false
			}
		}
	}
	if anyOf, ok := o.vals["anyOf"].([]any); ok {
		found := false
		for _, sub := range anyOf {
			if d.valid(v, sub, depth+1) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if oneOf, ok := o.vals["oneOf"].([]any); ok {
		n := 0
		for _, sub := range oneOf {
			if d.valid(v, sub, depth+1) {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	if not, ok := o.vals["not"]; ok && d.valid(v, not, depth+1) {
		return false
	}
	if cond, ok := o.vals["if"]; ok {
		branch := "else"
		if d.valid(v, cond, depth+1) {
			branch = "then"
		}
		if sub, ok := o.vals[branch]; ok && !d.valid(v, sub, depth+1) {
			return false
		}
	}
	return true
}

// typeBit values form the type masks of views.
const (
	tNull = 1 << iota
	tBool
	tInt
	tFrac // numbers that are not integers
	tString
	tArray
	tObject
	tAll = tNull | tBool | tInt | tFrac | tString | tArray | tObject
)

// typeBits returns the mask of one type name; unknown names allow nothing.
func typeBits(name string) int {
	switch name {
	case "null":
		return tNull
	case "boolean":
		return tBool
	case "integer":
		return tInt
	case "number":
		return tInt | tFrac
	case "string":
		return tString
	case "array":
		return tArray
	case "object":
		return tObject
	}
	return 0
}

// typeMaskOf returns the mask of a "type" keyword value.
func typeMaskOf(t any) int {
	switch x := t.(type) {
	case string:
		return typeBits(x)
	case []any:
		m := 0
		for _, e := range x {
			if s, ok := e.(string); ok {
				m |= typeBits(s)
			}
		}
		return m
	}
	return tAll
}

// valueBits returns the type bit of a value.
func valueBits(v any) int {
	switch t := v.(type) {
	case nil:
		return tNull
	case bool:
		return tBool
	case json.Number:
		if r, ok := ratOf(t); ok && r.IsInt() {
			return tInt
		}
		return tFrac
	case string:
		return tString
	case []any:
		return tArray
	case *object:
		return tObject
	}
	return 0
}

func typeMatches(v, t any) bool { return valueBits(v)&typeMaskOf(t) != 0 }

// ratKeyword returns a numeric keyword as a rational.
func ratKeyword(o *object, kw string) (*big.Rat, bool) {
	n, ok := o.vals[kw].(json.Number)
	if !ok {
		return nil, false
	}
	return ratOf(n)
}

// intKeyword returns a non-negative integer keyword, capped to keep loops
// bounded.
func intKeyword(o *object, kw string) (int, bool) {
	r, ok := ratKeyword(o, kw)
	if !ok || r.Sign() < 0 {
		return 0, false
	}
	f, _ := r.Float64()
	if f > 1e6 {
		return 1_000_000, true
	}
	return int(f), true
}

func validNumber(n json.Number, o *object) bool {
	r, ok := ratOf(n)
	if !ok {
		return false
	}
	if m, ok := ratKeyword(o, "minimum"); ok {
		c := r.Cmp(m)
		if c < 0 || (c == 0 && o.vals["exclusiveMinimum"] == true) {
			return false
		}
	}
	if m, ok := ratKeyword(o, "maximum"); ok {
		c := r.Cmp(m)
		if c > 0 || (c == 0 && o.vals["exclusiveMaximum"] == true) {
			return false
		}
	}
	if m, ok := ratKeyword(o, "exclusiveMinimum"); ok && r.Cmp(m) <= 0 {
		return false
	}
	if m, ok := ratKeyword(o, "exclusiveMaximum"); ok && r.Cmp(m) >= 0 {
		return false
	}
	if m, ok := ratKeyword(o, "multipleOf"); ok && m.Sign() > 0 {
		if !new(big.Rat).Quo(r, m).IsInt() {
			return false
		}
	}
	return true
}

func (d *document) validString(s string, o *object) bool {
	n := utf8.RuneCountInString(s)
	if m, ok := intKeyword(o, "minLength"); ok && n < m {
		return false
	}
	if m, ok := intKeyword(o, "maxLength"); ok && n > m {
		return false
	}
	if p, ok := o.vals["pattern"].(string); ok && !d.matchPattern(p, s) {
		return false
	}
	if f, ok := o.vals["format"].(string); ok && !formatOK(f, s) {
		return false
	}
	return true
}

func (d *document) validArray(a []any, o *object, depth int) bool {
	if m, ok := intKeyword(o, "minItems"); ok && len(a) < m {
		return false
	}
	if m, ok := intKeyword(o, "maxItems"); ok && len(a) > m {
		return false
	}
	prefix, _ := o.vals["prefixItems"].([]any)
	rest, hasRest := o.vals["items"]
	if tuple, ok := rest.([]any); ok { // draft 4 to 2019-09 tuple form
		prefix = tuple
		rest, hasRest = o.vals["additionalItems"]
	}
	for i, e := range a {
		switch {
		case i < len(prefix):
			if !d.valid(e, prefix[i], depth+1) {
				return false
			}
		case hasRest:
			if !d.valid(e, rest, depth+1) {
				return false
			}
		}
	}
	if o.vals["uniqueItems"] == true {
		for i := range a {
			for j := i + 1; j < len(a); j++ {
				if jsonEqual(a[i], a[j]) {
					return false
				}
			}
		}
	}
	if c, ok := o.vals["contains"]; ok {
		n := 0
		for _, e := range a {
			if d.valid(e, c, depth+1) {
				n++
			}
		}
		lo := 1
		if m, ok := intKeyword(o, "minContains"); ok {
			lo = m
		}
		if n < lo {
			return false
		}
		if m, ok := intKeyword(o, "maxContains"); ok && n > m {
			return false
		}
	}
	return true
}

func (d *document) validObj(v *object, o *object, depth int) bool {
	props, _ := o.vals["properties"].(*object)
	pats, _ := o.vals["patternProperties"].(*object)
	addl, hasAddl := o.vals["additionalProperties"]
	for _, k := range v.keys {
		val := v.vals[k]
		covered := false
		if s, ok := props.get(k); ok {
			covered = true
			if !d.valid(val, s, depth+1) {
				return false
			}
		}
		if pats != nil {
			for _, p := range pats.keys {
				if d.matchPattern(p, k) {
					covered = true
					if !d.valid(val, pats.vals[p], depth+1) {
						return false
					}
				}
			}
		}
		if !covered && hasAddl && !d.valid(val, addl, depth+1) {
			return false
		}
		if pn, ok := o.vals["propertyNames"]; ok && !d.valid(k, pn, depth+1) {
			return false
		}
	}
	if req, ok := o.vals["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				if _, ok := v.vals[name]; !ok {
					return false
				}
			}
		}
	}
	if m, ok := intKeyword(o, "minProperties"); ok && len(v.keys) < m {
		return false
	}
	if m, ok := intKeyword(o, "maxProperties"); ok && len(v.keys) > m {
		return false
	}
	for _, kw := range []string{"dependentRequired", "dependencies", "dependentSchemas"} {
		deps, ok := o.vals[kw].(*object)
		if !ok {
			continue
		}
		for _, k := range deps.keys {
			if _, present := v.vals[k]; !present {
				continue
			}
			switch dep := deps.vals[k].(type) {
			case []any:
				for _, r := range dep {
					if name, ok := r.(string); ok {
						if _, ok := v.vals[name]; !ok {
							return false
						}
					}
				}
			default:
				if kw != "dependentRequired" && !d.valid(v, dep, depth+1) {
					return false
				}
			}
		}
	}
	return true
}

// formatOK checks the formats the generator produces. Other formats pass.
func formatOK(format, s string) bool {
	switch format {
	case "date-time":
		_, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
		return err == nil
	case "date":
		_, err := time.Parse(time.DateOnly, s)
		return err == nil
	case "time":
		_, err := time.Parse("15:04:05.999999999Z07:00", strings.ToUpper(s))
		return err == nil
	case "email", "idn-email":
		at := strings.LastIndexByte(s, '@')
		return at > 0 && at < len(s)-1 && !strings.ContainsAny(s, " \t\r\n")
	case "uuid":
		return isUUID(s)
	case "ipv4":
		ip := net.ParseIP(s)
		return ip != nil && ip.To4() != nil && strings.Count(s, ".") == 3
	case "ipv6":
		return net.ParseIP(s) != nil && strings.Contains(s, ":")
	case "uri", "iri":
		u, err := url.Parse(s)
		return err == nil && u.Scheme != ""
	case "hostname", "idn-hostname":
		return isHostname(s)
	}
	return true
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(c)) {
				return false
			}
		}
	}
	return true
}

func isHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
