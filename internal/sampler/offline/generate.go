package offline

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/big"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kaptinlin/jsonpointer"
)

// Generation limits.
const (
	// optionalDepth is the nesting depth from which objects carry only their
	// required properties and arrays only their minItems, so that recursive
	// schemas end.
	optionalDepth = 5
	// maxDepth is the nesting depth at which generation gives up.
	maxDepth = 48
	// genBudget bounds the subschema generations of one value; past it the
	// generator stops retrying alternatives.
	genBudget = 4000
	// genLimit is the number of generations past genBudget after which the
	// generator gives up, bounding the work a hostile schema can cause.
	genLimit = 200_000
	// maxCount caps the items of an array and the members of an object.
	maxCount = 10_000
	// refLimit bounds $ref and allOf chains that do not consume the instance.
	refLimit = 64
)

// constError is an error that can be a constant.
type constError string

func (e constError) Error() string { return string(e) }

// ErrUnsatisfiable is returned by Value when it cannot build a value that
// satisfies the schema.
const ErrUnsatisfiable = constError("offline: cannot generate a value that satisfies the schema")

// Value returns a deterministic value that satisfies schema (a JSON Schema
// document). seed varies free-form strings: string properties such as
// "name", "title" or "summary" take words of it. The same schema and seed
// always give the same bytes. Value returns an error for unparsable schema
// JSON and an error matching ErrUnsatisfiable when it finds no valid value.
func Value(schema json.RawMessage, seed string) (json.RawMessage, error) {
	v, ok, err := generate(schema, seed, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrUnsatisfiable
	}
	return v, nil
}

// generate returns the best value it found for schema and whether that
// value satisfies the schema. forceObject adds {"type":"object"} to the
// root, as tool arguments are always objects.
func generate(schema json.RawMessage, seed string, forceObject bool) (json.RawMessage, bool, error) {
	root, err := parseJSON(schema)
	if err != nil {
		return nil, false, fmt.Errorf("offline: schema: %w", err)
	}
	g := &generator{doc: newDocument(root), seed: seed, words: contentWords(seed), budget: genBudget}
	nodes := []any{root}
	if forceObject {
		obj := newObject()
		obj.set("type", "object")
		nodes = append(nodes, obj)
	}
	val, ok := g.gen(conj{nodes: nodes}, state{})
	return json.RawMessage(encodeJSON(val)), ok, nil
}

// generator builds values for the subschemas of one document.
type generator struct {
	doc    *document
	seed   string
	words  []string
	budget int
}

// groupKey names one anyOf, oneOf or if keyword of one schema object.
type groupKey struct {
	node *object
	kw   string
}

// conj is a conjunction of subschemas a value must satisfy. decided holds
// the anyOf/oneOf/if groups whose branch was already added to nodes.
type conj struct {
	nodes   []any
	decided map[groupKey]bool
}

// with returns c plus branch, with the group key decided.
func (c conj) with(branch any, key groupKey) conj {
	nodes := make([]any, 0, len(c.nodes)+1)
	nodes = append(nodes, c.nodes...)
	nodes = append(nodes, branch)
	decided := make(map[groupKey]bool, len(c.decided)+1)
	for k := range c.decided {
		decided[k] = true
	}
	decided[key] = true
	return conj{nodes: nodes, decided: decided}
}

// state is where a value is being generated.
type state struct {
	depth   int
	path    string
	hint    string // name of the property the value is stored under
	variant int    // selects among alternative values, for uniqueness and retries
}

func (st state) child(seg, hint string, variant int) state {
	return state{depth: st.depth + 1, path: st.path + "/" + seg, hint: hint, variant: variant}
}

type group struct {
	key      groupKey
	branches []any
}

// closedRule is the additionalProperties of one schema object: names it
// declares or matches by pattern are free, others must satisfy addl.
type closedRule struct {
	props    *object
	patterns *object
	addl     any
}

type patProp struct {
	pattern string
	schema  any
}

// view is the flattened constraints of a conjunction: $ref and allOf are
// merged, anyOf/oneOf/if are left as groups to branch on.
type view struct {
	unsat     bool
	types     int
	typeOrder []string
	consts    []any
	enums     [][]any
	samples   []any

	lo, hi         *big.Rat
	loExcl, hiExcl bool
	mults          []*big.Rat

	minLen, maxLen int
	patterns       []string
	format         string

	prefix             [][]any
	items              []any
	minItems, maxItems int
	unique             bool
	contains           []any

	propOrder          []string
	props              map[string][]any
	required           []string
	requiredSet        map[string]bool
	closed             []closedRule
	patProps           []patProp
	minProps, maxProps int
	depReq             map[string][]string

	objectKw, arrayKw, stringKw, numberKw bool

	groups []group
}

func (g *generator) flatten(c conj) *view {
	v := &view{
		types:       tAll,
		maxLen:      -1,
		maxItems:    -1,
		maxProps:    -1,
		props:       map[string][]any{},
		requiredSet: map[string]bool{},
		depReq:      map[string][]string{},
	}
	for _, n := range c.nodes {
		g.addNode(v, n, c, 0)
	}
	return v
}

// addNode merges the keywords of schema n into v.
func (g *generator) addNode(v *view, n any, c conj, refDepth int) {
	if b, ok := n.(bool); ok {
		if !b {
			v.unsat = true
		}
		return
	}
	o, ok := n.(*object)
	if !ok || refDepth > refLimit {
		return
	}
	for _, kw := range []string{"$ref", "$dynamicRef"} {
		if ref, ok := o.vals[kw].(string); ok {
			if target, ok := g.doc.resolve(ref); ok {
				g.addNode(v, target, c, refDepth+1)
			}
		}
	}
	if t, ok := o.vals["type"]; ok {
		v.types &= typeMaskOf(t)
		if v.typeOrder == nil {
			switch x := t.(type) {
			case string:
				v.typeOrder = []string{x}
			case []any:
				v.typeOrder = []string{}
				for _, e := range x {
					if s, ok := e.(string); ok {
						v.typeOrder = append(v.typeOrder, s)
					}
				}
			}
		}
	}
	if cv, ok := o.vals["const"]; ok {
		v.consts = append(v.consts, cv)
	}
	if e, ok := o.vals["enum"].([]any); ok {
		v.enums = append(v.enums, e)
	}
	ex, _ := o.vals["examples"].([]any)
	if len(ex) > 0 {
		v.samples = append(v.samples, ex[0])
	}
	if d, ok := o.vals["default"]; ok {
		v.samples = append(v.samples, d)
	}
	if len(ex) > 1 {
		v.samples = append(v.samples, ex[1:]...)
	}
	g.addNumeric(v, o)
	g.addString(v, o)
	g.addArray(v, o)
	g.addObject(v, o)
	if all, ok := o.vals["allOf"].([]any); ok {
		for _, sub := range all {
			g.addNode(v, sub, c, refDepth+1)
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		key := groupKey{o, kw}
		if branches, ok := o.vals[kw].([]any); ok && !c.decided[key] {
			v.groups = append(v.groups, group{key: key, branches: branches})
		}
	}
	if cond, ok := o.vals["if"]; ok && !c.decided[groupKey{o, "if"}] {
		then, ok := o.vals["then"]
		if !ok {
			then = true
		}
		els, ok := o.vals["else"]
		if !ok {
			els = true
		}
		notCond := newObject()
		notCond.set("not", cond)
		v.groups = append(v.groups, group{key: groupKey{o, "if"}, branches: []any{allOf(cond, then), allOf(notCond, els)}})
	}
}

func allOf(schemas ...any) *object {
	o := newObject()
	o.set("allOf", schemas)
	return o
}

func (g *generator) addNumeric(v *view, o *object) {
	if m, ok := ratKeyword(o, "minimum"); ok {
		v.numberKw = true
		setLower(v, m, o.vals["exclusiveMinimum"] == true)
	}
	if m, ok := ratKeyword(o, "maximum"); ok {
		v.numberKw = true
		setUpper(v, m, o.vals["exclusiveMaximum"] == true)
	}
	if m, ok := ratKeyword(o, "exclusiveMinimum"); ok {
		v.numberKw = true
		setLower(v, m, true)
	}
	if m, ok := ratKeyword(o, "exclusiveMaximum"); ok {
		v.numberKw = true
		setUpper(v, m, true)
	}
	if m, ok := ratKeyword(o, "multipleOf"); ok && m.Sign() > 0 {
		v.numberKw = true
		v.mults = append(v.mults, m)
	}
}

func setLower(v *view, m *big.Rat, excl bool) {
	if v.lo == nil || m.Cmp(v.lo) > 0 {
		v.lo, v.loExcl = m, excl
	} else if m.Cmp(v.lo) == 0 {
		v.loExcl = v.loExcl || excl
	}
}

func setUpper(v *view, m *big.Rat, excl bool) {
	if v.hi == nil || m.Cmp(v.hi) < 0 {
		v.hi, v.hiExcl = m, excl
	} else if m.Cmp(v.hi) == 0 {
		v.hiExcl = v.hiExcl || excl
	}
}

// tighterMax combines two upper bounds; cur < 0 means none yet.
func tighterMax(cur, m int) int {
	if cur < 0 || m < cur {
		return m
	}
	return cur
}

func (g *generator) addString(v *view, o *object) {
	if m, ok := intKeyword(o, "minLength"); ok {
		v.stringKw = true
		v.minLen = max(v.minLen, m)
	}
	if m, ok := intKeyword(o, "maxLength"); ok {
		v.stringKw = true
		v.maxLen = tighterMax(v.maxLen, m)
	}
	if p, ok := o.vals["pattern"].(string); ok {
		v.stringKw = true
		v.patterns = append(v.patterns, p)
	}
	if f, ok := o.vals["format"].(string); ok && v.format == "" {
		v.stringKw = true
		v.format = f
	}
}

func (g *generator) addArray(v *view, o *object) {
	prefix, hasPrefix := o.vals["prefixItems"].([]any)
	items, hasItems := o.vals["items"]
	if tuple, ok := items.([]any); ok {
		prefix, hasPrefix = tuple, true
		items, hasItems = o.vals["additionalItems"]
	}
	if hasPrefix {
		v.arrayKw = true
		for i, s := range prefix {
			if i == len(v.prefix) {
				v.prefix = append(v.prefix, nil)
			}
			v.prefix[i] = append(v.prefix[i], s)
		}
	}
	if hasItems {
		v.arrayKw = true
		v.items = append(v.items, items)
	}
	if m, ok := intKeyword(o, "minItems"); ok {
		v.arrayKw = true
		v.minItems = max(v.minItems, m)
	}
	if m, ok := intKeyword(o, "maxItems"); ok {
		v.arrayKw = true
		v.maxItems = tighterMax(v.maxItems, m)
	}
	if o.vals["uniqueItems"] == true {
		v.arrayKw = true
		v.unique = true
	}
	if c, ok := o.vals["contains"]; ok {
		v.arrayKw = true
		v.contains = append(v.contains, c)
	}
}

func (g *generator) addObject(v *view, o *object) {
	props, hasProps := o.vals["properties"].(*object)
	if hasProps {
		v.objectKw = true
		for _, k := range props.keys {
			if _, seen := v.props[k]; !seen {
				v.propOrder = append(v.propOrder, k)
			}
			v.props[k] = append(v.props[k], props.vals[k])
		}
	}
	if req, ok := o.vals["required"].([]any); ok {
		v.objectKw = true
		for _, r := range req {
			if name, ok := r.(string); ok && !v.requiredSet[name] {
				v.requiredSet[name] = true
				v.required = append(v.required, name)
			}
		}
	}
	pats, hasPats := o.vals["patternProperties"].(*object)
	if hasPats {
		v.objectKw = true
		for _, p := range pats.keys {
			v.patProps = append(v.patProps, patProp{pattern: p, schema: pats.vals[p]})
		}
	}
	if addl, ok := o.vals["additionalProperties"]; ok {
		v.objectKw = true
		v.closed = append(v.closed, closedRule{props: props, patterns: pats, addl: addl})
	}
	if m, ok := intKeyword(o, "minProperties"); ok {
		v.objectKw = true
		v.minProps = max(v.minProps, m)
	}
	if m, ok := intKeyword(o, "maxProperties"); ok {
		v.objectKw = true
		v.maxProps = tighterMax(v.maxProps, m)
	}
	for _, kw := range []string{"dependentRequired", "dependencies"} {
		deps, ok := o.vals[kw].(*object)
		if !ok {
			continue
		}
		v.objectKw = true
		for _, k := range deps.keys {
			if list, ok := deps.vals[k].([]any); ok {
				for _, r := range list {
					if name, ok := r.(string); ok {
						v.depReq[k] = append(v.depReq[k], name)
					}
				}
			}
		}
	}
}

// gen returns a value for c and whether it satisfies every schema of c.
// It retries with other variants when the first value does not.
func (g *generator) gen(c conj, st state) (any, bool) {
	if st.depth > maxDepth {
		return nil, false
	}
	g.budget--
	if g.budget < -genLimit {
		return nil, false
	}
	tries := 4
	if g.budget <= 0 {
		tries = 1
	}
	v := g.flatten(c)
	if len(v.groups) > 0 {
		// Every branch is generated and validated with its own retries.
		return g.genView(v, c, st)
	}
	var first any
	for i := range tries {
		s := st
		s.variant = st.variant + i
		val, ok := g.genView(v, c, s)
		if ok && g.doc.validAll(val, c.nodes) {
			return val, true
		}
		if i == 0 {
			first = val
		}
	}
	return first, false
}

// genView builds one candidate value for the flattened view v of c. ok is
// false when no candidate could be built.
func (g *generator) genView(v *view, c conj, st state) (any, bool) {
	if v.unsat || v.types == 0 {
		return nil, false
	}
	if len(v.groups) > 0 {
		grp := v.groups[0]
		branches := grp.branches
		if st.depth >= optionalDepth {
			branches = g.leanFirst(c, grp)
		}
		var first any
		for i, b := range branches {
			val, ok := g.gen(c.with(b, grp.key), st)
			if ok {
				return val, true
			}
			if i == 0 {
				first = val
			}
			if g.budget <= 0 {
				break
			}
		}
		return first, false
	}
	if len(v.consts) > 0 {
		return v.consts[0], true
	}
	if len(v.enums) > 0 {
		var cands []any
		for _, m := range v.enums[0] {
			inAll := true
			for _, e := range v.enums[1:] {
				if !containsEqual(e, m) {
					inAll = false
					break
				}
			}
			if inAll {
				cands = append(cands, m)
			}
		}
		if len(cands) == 0 {
			return nil, false
		}
		for i := range cands {
			m := cands[(st.variant+i)%len(cands)]
			if g.doc.validAll(m, c.nodes) {
				return m, true
			}
		}
		return cands[st.variant%len(cands)], true
	}
	if st.variant == 0 {
		for _, s := range v.samples {
			if g.doc.validAll(s, c.nodes) {
				return s, true
			}
		}
	}
	switch chooseType(v) {
	case "null":
		return nil, true
	case "boolean":
		return st.variant%2 == 0, true
	case "integer":
		return g.genNumber(v, true, st)
	case "number":
		return g.genNumber(v, false, st)
	case "array":
		return g.genArray(v, st)
	case "object":
		return g.genObject(v, st)
	default:
		return g.genString(v, st)
	}
}

// leanFirst orders the branches of grp so that those giving scalars come
// before those giving objects or arrays, which deep inside recursive
// schemas keeps values from growing without end.
func (g *generator) leanFirst(c conj, grp group) []any {
	var lean, rich []any
	for _, b := range grp.branches {
		v := g.flatten(c.with(b, grp.key))
		t := chooseType(v)
		if len(v.groups) > 0 || (len(v.consts) == 0 && len(v.enums) == 0 && (t == "object" || t == "array")) {
			rich = append(rich, b)
		} else {
			lean = append(lean, b)
		}
	}
	return append(lean, rich...)
}

// chooseType picks the JSON type to generate: the first non-null type the
// schema lists that the conjunction allows, else one inferred from the
// keywords present.
func chooseType(v *view) string {
	name := func(bits int) string {
		switch {
		case bits&tObject != 0:
			return "object"
		case bits&tArray != 0:
			return "array"
		case bits&tString != 0:
			return "string"
		case bits&tFrac != 0:
			return "number"
		case bits&tInt != 0:
			return "integer"
		case bits&tBool != 0:
			return "boolean"
		}
		return "null"
	}
	if v.types != tAll {
		for _, t := range v.typeOrder {
			if t != "null" && typeBits(t)&v.types != 0 {
				return name(typeBits(t) & v.types)
			}
		}
		if v.types&^tNull != 0 {
			return name(v.types &^ tNull)
		}
		return "null"
	}
	switch {
	case v.objectKw:
		return "object"
	case v.arrayKw:
		return "array"
	case v.stringKw:
		return "string"
	case v.numberKw:
		return "number"
	}
	return "string"
}

func containsEqual(list []any, v any) bool {
	for _, e := range list {
		if jsonEqual(e, v) {
			return true
		}
	}
	return false
}

// genNumber picks a number within the bounds of v, a multiple of every
// multipleOf (and of 1 for integers): 0 when allowed, else the value
// nearest to 0. Variants step away from it.
func (g *generator) genNumber(v *view, integer bool, st state) (any, bool) {
	var step *big.Rat
	if integer {
		step = big.NewRat(1, 1)
	}
	for _, m := range v.mults {
		if step == nil {
			step = new(big.Rat).Set(m)
		} else {
			step = ratLCM(step, m)
		}
	}
	var r *big.Rat
	var ok bool
	if step != nil {
		r, ok = steppedNumber(v, step, st.variant)
	} else {
		r, ok = continuousNumber(v, st.variant)
	}
	if !ok {
		return nil, false
	}
	return formatRat(r), true
}

// ratLCM returns the least common multiple of two positive rationals:
// lcm(a/b, c/d) = lcm(a, c) / gcd(b, d).
func ratLCM(x, y *big.Rat) *big.Rat {
	a, b := x.Num(), x.Denom()
	c, d := y.Num(), y.Denom()
	gac := new(big.Int).GCD(nil, nil, a, c)
	l := new(big.Int).Mul(a, c)
	l.Quo(l, gac)
	gbd := new(big.Int).GCD(nil, nil, b, d)
	return new(big.Rat).SetFrac(l, gbd)
}

// floorDiv returns floor(x / step) for a positive step.
func floorDiv(x, step *big.Rat) *big.Int {
	q := new(big.Rat).Quo(x, step)
	return new(big.Int).Div(q.Num(), q.Denom()) // Euclidean: floor for positive divisor
}

func steppedNumber(v *view, step *big.Rat, variant int) (*big.Rat, bool) {
	var kLo, kHi *big.Int
	if v.lo != nil {
		// ceil(lo/step) = -floor(-lo/step)
		kLo = new(big.Int).Neg(floorDiv(new(big.Rat).Neg(v.lo), step))
		if v.loExcl && new(big.Rat).Mul(new(big.Rat).SetInt(kLo), step).Cmp(v.lo) == 0 {
			kLo.Add(kLo, big.NewInt(1))
		}
	}
	if v.hi != nil {
		kHi = floorDiv(v.hi, step)
		if v.hiExcl && new(big.Rat).Mul(new(big.Rat).SetInt(kHi), step).Cmp(v.hi) == 0 {
			kHi.Sub(kHi, big.NewInt(1))
		}
	}
	if kLo != nil && kHi != nil && kLo.Cmp(kHi) > 0 {
		return nil, false
	}
	k0 := big.NewInt(0)
	if kLo != nil && k0.Cmp(kLo) < 0 {
		k0.Set(kLo)
	}
	if kHi != nil && k0.Cmp(kHi) > 0 {
		k0.Set(kHi)
	}
	k := new(big.Int).Add(k0, big.NewInt(int64(variant)))
	if kHi != nil && k.Cmp(kHi) > 0 {
		// Step downwards instead: k0 - (k - kHi).
		over := new(big.Int).Sub(k, kHi)
		k.Sub(k0, over)
		if kLo != nil && k.Cmp(kLo) < 0 {
			k.Set(k0)
		}
	}
	return new(big.Rat).Mul(new(big.Rat).SetInt(k), step), true
}

func continuousNumber(v *view, variant int) (*big.Rat, bool) {
	lo, hi := v.lo, v.hi
	if lo != nil && hi != nil {
		c := lo.Cmp(hi)
		if c > 0 || (c == 0 && (v.loExcl || v.hiExcl)) {
			return nil, false
		}
	}
	above := func(r *big.Rat) bool {
		if lo == nil {
			return true
		}
		c := r.Cmp(lo)
		return c > 0 || (c == 0 && !v.loExcl)
	}
	below := func(r *big.Rat) bool {
		if hi == nil {
			return true
		}
		c := r.Cmp(hi)
		return c < 0 || (c == 0 && !v.hiExcl)
	}
	mid := func() *big.Rat {
		m := new(big.Rat).Add(lo, hi)
		return m.Quo(m, big.NewRat(2, 1))
	}
	one := big.NewRat(1, 1)
	t := new(big.Rat)
	switch {
	case !above(t):
		switch {
		case !v.loExcl:
			t.Set(lo)
		case hi != nil:
			t = mid()
		default:
			t.Add(lo, one)
		}
	case !below(t):
		switch {
		case !v.hiExcl:
			t.Set(hi)
		case lo != nil:
			t = mid()
		default:
			t.Sub(hi, one)
		}
	}
	if variant == 0 {
		return t, true
	}
	delta := big.NewRat(int64(variant), 2)
	if up := new(big.Rat).Add(t, delta); below(up) {
		return up, true
	}
	if down := new(big.Rat).Sub(t, delta); above(down) {
		return down, true
	}
	// Both directions leave the range: interpolate towards the upper
	// bound, a different point for every variant.
	frac := big.NewRat(int64(variant), int64(variant)+1)
	r := new(big.Rat).Sub(hi, t)
	r.Mul(r, frac)
	r.Add(r, t)
	return r, true
}

// genString builds a string: a format value, a pattern match or free text
// derived from the seed, within the length bounds.
func (g *generator) genString(v *view, st state) (any, bool) {
	if v.maxLen >= 0 && v.minLen > v.maxLen {
		return nil, false
	}
	if v.format != "" {
		if s, ok := formatValue(v.format, g.seed+st.path, st.variant); ok && g.stringFits(v, s) {
			return s, true
		}
	}
	if len(v.patterns) > 0 {
		return g.patternValue(v, st)
	}
	return fitLength(g.freeText(st), v.minLen, v.maxLen, st.variant), true
}

// stringFits reports whether s satisfies the string constraints of v.
func (g *generator) stringFits(v *view, s string) bool {
	n := utf8.RuneCountInString(s)
	if n < v.minLen || (v.maxLen >= 0 && n > v.maxLen) {
		return false
	}
	for _, p := range v.patterns {
		if !g.doc.matchPattern(p, s) {
			return false
		}
	}
	return v.format == "" || formatOK(v.format, s)
}

// patternValue returns the variant-th distinct string that matches every
// pattern of v and fits its bounds, trying free text, words of the seed and
// strings built from the first pattern.
func (g *generator) patternValue(v *view, st state) (any, bool) {
	var cands []string
	add := func(s string) bool {
		if g.stringFits(v, s) && !containsString(cands, s) {
			cands = append(cands, s)
		}
		return len(cands) > st.variant
	}
	if add(fitLength(g.freeText(st), v.minLen, v.maxLen, 0)) {
		return cands[st.variant], true
	}
	for _, w := range g.words {
		if add(w) {
			return cands[st.variant], true
		}
	}
	re, err := syntax.Parse(v.patterns[0], syntax.Perl)
	if err == nil {
		var fallback string
		for choice := 0; choice < st.variant+4; choice++ {
			for _, rep := range []int{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128} {
				s, ok := patternString(re, rep, choice)
				if !ok {
					continue
				}
				if fallback == "" {
					fallback = s
				}
				if add(s) {
					return cands[st.variant], true
				}
				// Unanchored patterns match inside longer strings too.
				if v.minLen > 0 && utf8.RuneCountInString(s) < v.minLen {
					if add(s + strings.Repeat("x", v.minLen-utf8.RuneCountInString(s))) {
						return cands[st.variant], true
					}
				}
			}
		}
		if len(cands) == 0 && fallback != "" {
			return fallback, true
		}
	}
	if len(cands) == 0 {
		return fitLength(g.freeText(st), v.minLen, v.maxLen, st.variant), true
	}
	return cands[st.variant%len(cands)], true
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// fitLength pads or cuts s to [minLen, maxLen] runes (maxLen < 0: no upper
// bound). Variants above 0 get a numeric suffix so that they differ.
func fitLength(s string, minLen, maxLen, variant int) string {
	suffix := ""
	if variant > 0 {
		suffix = " " + strconv.Itoa(variant+1)
	}
	r := []rune(s)
	sl := utf8.RuneCountInString(suffix)
	if maxLen >= 0 && len(r)+sl > maxLen {
		if maxLen-sl < 1 && variant > 0 {
			// No room for text and suffix: spell the variant in letters.
			r = []rune(letters(variant))
			suffix = ""
		} else {
			r = []rune(strings.TrimRightFunc(string(r[:max(0, maxLen-sl)]), unicode.IsSpace))
		}
	}
	out := string(r) + suffix
	if n := utf8.RuneCountInString(out); n < minLen {
		const filler = " lorem ipsum dolor sit amet consectetur adipiscing elit"
		var b strings.Builder
		b.WriteString(out)
		for n < minLen {
			for _, c := range filler {
				if n >= minLen {
					break
				}
				if n == 0 && c == ' ' {
					continue
				}
				b.WriteRune(c)
				n++
			}
		}
		out = b.String()
	}
	if maxLen >= 0 {
		if rs := []rune(out); len(rs) > maxLen {
			out = string(rs[:maxLen])
		}
	}
	return out
}

// letters spells n in base 26 with the letters a to z.
func letters(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('a' + n%26)}, b...)
		n /= 26
		if n == 0 {
			return string(b)
		}
		n--
	}
}

// freeText returns seed-derived text for a string without format or
// pattern, chosen by the name of the property that holds it.
func (g *generator) freeText(st state) string {
	hint := strings.ToLower(st.hint)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(hint, w) {
				return true
			}
		}
		return false
	}
	switch {
	case hint == "" || has("summary", "description", "text", "content", "message", "body", "answer",
		"reason", "explanation", "comment", "note", "detail", "response", "reply", "query",
		"question", "prompt", "feedback", "analysis", "abstract", "input", "instruction"):
		if g.seed == "" {
			return "offline sample text"
		}
		return clipRunes(strings.Join(strings.Fields(g.seed), " "), 200)
	case has("name", "title", "label", "subject", "topic", "headline", "heading", "caption"):
		if len(g.words) == 0 {
			return "Example " + st.hint
		}
		return strings.Join(g.words[:min(4, len(g.words))], " ")
	case has("city", "location", "place", "country", "region", "destination", "address", "town", "origin"):
		if w := salientWord(g.seed); w != "" {
			return w
		}
	}
	if len(g.words) == 0 {
		if st.hint != "" {
			return "example " + st.hint
		}
		return "example"
	}
	return g.words[hashString(st.path)%uint32(len(g.words))]
}

// clipRunes cuts s to at most n runes.
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// contentWords returns the words of s that carry meaning: punctuation
// trimmed, stop words and words shorter than 3 letters left out. When none
// is left it returns every word.
func contentWords(s string) []string {
	var all, content []string
	for _, f := range strings.Fields(s) {
		w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if w == "" {
			continue
		}
		all = append(all, w)
		if utf8.RuneCountInString(w) >= 3 && !isStopWord(strings.ToLower(w)) {
			content = append(content, w)
		}
	}
	if len(content) == 0 {
		return all
	}
	return content
}

// salientWord returns the last capitalised word of s that does not start a
// sentence (likely a proper name), else its last content word.
func salientWord(s string) string {
	fields := strings.Fields(s)
	sentenceStart := true
	best := ""
	for _, f := range fields {
		w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if w != "" && !sentenceStart {
			if r, _ := utf8.DecodeRuneInString(w); unicode.IsUpper(r) {
				best = w
			}
		}
		sentenceStart = strings.HasSuffix(f, ".") || strings.HasSuffix(f, "?") || strings.HasSuffix(f, "!")
	}
	if best != "" {
		return best
	}
	if cw := contentWords(s); len(cw) > 0 {
		return cw[len(cw)-1]
	}
	return ""
}

// formatValue returns a fixed, valid value of a string format; variants
// give different values. ok is false for formats it does not know.
func formatValue(format, seed string, variant int) (string, bool) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	switch format {
	case "date-time":
		return base.AddDate(0, 0, variant).Format(time.RFC3339), true
	case "date":
		return base.AddDate(0, 0, variant).Format(time.DateOnly), true
	case "time":
		return base.Add(12*time.Hour + time.Duration(variant)*time.Minute).Format("15:04:05Z07:00"), true
	case "duration":
		return "P" + strconv.Itoa(variant+1) + "D", true
	case "email", "idn-email":
		if variant == 0 {
			return "user@example.com", true
		}
		return "user" + strconv.Itoa(variant+1) + "@example.com", true
	case "uuid":
		return uuidOf(seed, variant), true
	case "uri", "iri":
		if variant == 0 {
			return "https://example.com/", true
		}
		return "https://example.com/item/" + strconv.Itoa(variant+1), true
	case "uri-reference", "iri-reference":
		return "/example/" + strconv.Itoa(variant+1), true
	case "uri-template":
		return "https://example.com/{id}/" + strconv.Itoa(variant+1), true
	case "hostname", "idn-hostname":
		if variant == 0 {
			return "example.com", true
		}
		return "host" + strconv.Itoa(variant+1) + ".example.com", true
	case "ipv4":
		return "192.0.2." + strconv.Itoa(1+variant%254), true
	case "ipv6":
		return "2001:db8::" + strconv.FormatInt(int64(variant+1), 16), true
	case "json-pointer":
		return "/example/" + strconv.Itoa(variant), true
	case "relative-json-pointer":
		return strconv.Itoa(variant), true
	case "regex":
		return "^example" + strconv.Itoa(variant+1) + "$", true
	}
	return "", false
}

// uuidOf returns a deterministic UUID in the version 4 layout.
func uuidOf(seed string, variant int) string {
	h := fnv.New128a()
	h.Write([]byte(seed))
	var vb [8]byte
	binary.BigEndian.PutUint64(vb[:], uint64(variant))
	h.Write(vb[:])
	b := h.Sum(nil)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	var out [36]byte
	j := 0
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = hex[c>>4], hex[c&0xf]
		j += 2
	}
	return string(out[:])
}

// hashString is the 32-bit FNV-1a hash of s.
func hashString(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// genArray builds an array: the prefixItems, one item (or minItems items)
// of items, unique when uniqueItems asks, with a contains match.
func (g *generator) genArray(v *view, st state) (any, bool) {
	itemsFalse := false
	for _, it := range v.items {
		if b, ok := it.(bool); ok && !b {
			itemsFalse = true
		}
	}
	n := 0
	if st.depth < optionalDepth && g.budget > 0 {
		n = len(v.prefix)
		if n == 0 && !itemsFalse {
			n = 1
		}
	}
	n = min(max(n, v.minItems), maxCount)
	if v.maxItems >= 0 {
		n = min(n, v.maxItems)
	}
	if itemsFalse {
		n = min(n, len(v.prefix))
	}
	itemNodes := func(i int) []any {
		if i < len(v.prefix) {
			return v.prefix[i]
		}
		return v.items
	}
	arr := make([]any, 0, n)
	ok := true
	// Items vary only when they must differ.
	itemVariant := func(i int) int {
		if v.unique {
			return st.variant + i
		}
		return st.variant
	}
	for i := range n {
		val, good := g.arrayItem(v, arr, itemNodes(i), st.child(strconv.Itoa(i), st.hint, itemVariant(i)))
		ok = ok && good
		arr = append(arr, val)
	}
	if len(v.contains) > 0 && !g.anyContains(v, arr) {
		i := len(arr)
		if (v.maxItems >= 0 && i >= v.maxItems) || (itemsFalse && i >= len(v.prefix)) {
			i--
		}
		if i >= 0 {
			nodes := append(append([]any{}, itemNodes(i)...), v.contains...)
			val, good := g.arrayItem(v, arr[:i], nodes, st.child(strconv.Itoa(i), st.hint, itemVariant(i)))
			ok = ok && good
			if i == len(arr) {
				arr = append(arr, val)
			} else {
				arr[i] = val
			}
		}
	}
	return arr, ok
}

// arrayItem generates one item, retrying variants while uniqueItems finds
// it among prev.
func (g *generator) arrayItem(v *view, prev []any, nodes []any, st state) (any, bool) {
	val, ok := g.gen(conj{nodes: nodes}, st)
	for j := 1; v.unique && containsEqual(prev, val) && j < 16; j++ {
		s := st
		s.variant = st.variant + j*len(prev) + j
		val, ok = g.gen(conj{nodes: nodes}, s)
	}
	return val, ok && !(v.unique && containsEqual(prev, val))
}

func (g *generator) anyContains(v *view, arr []any) bool {
	for _, e := range arr {
		if g.doc.validAll(e, v.contains) {
			return true
		}
	}
	return false
}

// propNodes returns the schemas a member named k must satisfy.
func (g *generator) propNodes(v *view, k string) []any {
	nodes := append([]any{}, v.props[k]...)
	for _, pp := range v.patProps {
		if g.doc.matchPattern(pp.pattern, k) {
			nodes = append(nodes, pp.schema)
		}
	}
	for _, rule := range v.closed {
		if _, ok := rule.props.get(k); ok {
			continue
		}
		matched := false
		if rule.patterns != nil {
			for _, p := range rule.patterns.keys {
				if g.doc.matchPattern(p, k) {
					matched = true
					break
				}
			}
		}
		if !matched {
			nodes = append(nodes, rule.addl)
		}
	}
	return nodes
}

// genObject builds an object with every required property and, above
// optionalDepth, every declared optional one, in declaration order.
func (g *generator) genObject(v *view, st state) (any, bool) {
	// must holds the required properties and those they depend on.
	must := map[string]bool{}
	var mustKeys []string
	addMust := func(k string) {
		if !must[k] {
			must[k] = true
			mustKeys = append(mustKeys, k)
		}
	}
	for _, k := range v.required {
		addMust(k)
	}
	for i := 0; i < len(mustKeys); i++ { // dependentRequired closure; mustKeys grows
		for _, d := range v.depReq[mustKeys[i]] {
			addMust(d)
		}
	}
	include := map[string]bool{}
	for k := range must {
		include[k] = true
	}
	count := len(mustKeys)
	if st.depth < optionalDepth && g.budget > 0 {
		for _, k := range v.propOrder {
			if include[k] {
				continue
			}
			var extra []string
			for _, d := range append([]string{k}, v.depReq[k]...) {
				if !include[d] && !containsString(extra, d) {
					extra = append(extra, d)
				}
			}
			if v.maxProps >= 0 && count+len(extra) > v.maxProps {
				continue
			}
			for _, d := range extra {
				include[d] = true
			}
			count += len(extra)
		}
	}
	// Declared properties in declaration order, then the rest.
	var keys []string
	for _, k := range v.propOrder {
		if include[k] {
			keys = append(keys, k)
		}
	}
	for _, k := range mustKeys {
		if !containsString(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range v.propOrder {
		for _, d := range v.depReq[k] {
			if include[k] && include[d] && !containsString(keys, d) {
				keys = append(keys, d)
			}
		}
	}
	o := newObject()
	ok := true
	for _, k := range keys {
		val, good := g.gen(conj{nodes: g.propNodes(v, k)}, st.child(jsonpointer.EscapeToken(k), k, st.variant))
		if !good && !must[k] && !dependedOn(v, keys, k) {
			continue // drop an optional property that cannot be satisfied
		}
		ok = ok && good
		o.set(k, val)
	}
	if len(o.keys) < v.minProps {
		ok = g.fillProperties(v, o, st) && ok
	}
	return o, ok
}

// dependedOn reports whether some key of keys requires k.
func dependedOn(v *view, keys []string, k string) bool {
	for _, key := range keys {
		if containsString(v.depReq[key], k) {
			return true
		}
	}
	return false
}

// fillProperties adds members until o has minProperties: declared optional
// properties first, then names matching patternProperties, then extraN.
func (g *generator) fillProperties(v *view, o *object, st state) bool {
	try := func(k string) {
		if _, dup := o.vals[k]; dup || len(o.keys) >= v.minProps {
			return
		}
		val, ok := g.gen(conj{nodes: g.propNodes(v, k)}, st.child(jsonpointer.EscapeToken(k), k, st.variant))
		if ok {
			o.set(k, val)
		}
	}
	for _, k := range v.propOrder {
		try(k)
	}
	for _, pp := range v.patProps {
		re, err := syntax.Parse(pp.pattern, syntax.Perl)
		if err != nil {
			continue
		}
		for choice := 0; choice < v.minProps+4 && len(o.keys) < v.minProps; choice++ {
			if k, ok := patternString(re, 1, choice); ok && g.doc.matchPattern(pp.pattern, k) {
				try(k)
			}
		}
	}
	for i := 1; len(o.keys) < v.minProps && i <= min(v.minProps, maxCount)+16; i++ {
		try("extra" + strconv.Itoa(i))
	}
	return len(o.keys) >= v.minProps
}

// isStopWord reports whether the lower-case word w is too common to say
// anything about a prompt or a tool.
func isStopWord(w string) bool {
	switch w {
	case "the", "and", "for", "are", "but", "not", "you", "your", "yours", "all", "any", "can",
		"had", "her", "was", "one", "our", "out", "has", "have", "him", "his", "how", "its",
		"may", "new", "now", "old", "see", "two", "who", "did", "does", "doing", "done", "get",
		"gets", "got", "let", "put", "say", "says", "she", "too", "use", "uses", "used", "using",
		"with", "without", "this", "that", "these", "those", "there", "their", "them", "they",
		"then", "than", "what", "when", "where", "which", "while", "whom", "whose", "why",
		"will", "would", "could", "should", "shall", "from", "into", "onto", "about", "above",
		"below", "over", "under", "again", "also", "just", "only", "some", "such", "very",
		"more", "most", "much", "many", "each", "every", "both", "few", "other", "same",
		"been", "being", "were", "here", "like", "make", "makes", "made", "want", "need",
		"please", "tell", "give", "show", "know", "set", "sets", "tool", "tools", "function",
		"returns", "return", "given", "value", "values", "data", "current", "currently",
		"specified", "provided", "optional", "required", "string", "number", "list", "via",
		"per", "etc", "yes", "okay", "hello", "thanks", "thank", "today", "something", "thing",
		"things", "call", "run", "running", "whats", "what's", "it's", "i'm", "don't":
		return true
	}
	return false
}
