package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/kaptinlin/jsonpointer"

	"github.com/sampled/sampled/internal/sampler"
)

// Generation limits.
const (
	// optionalDepth is the nesting depth from which objects carry only their
	// required properties and arrays only their minItems, so that recursive
	// schemas end.
	optionalDepth = 5
	// maxDepth is the nesting depth at which generation gives up.
	maxDepth = 48
	// genBudget bounds the subschema generations of one value; past it
	// optional members and items are left out.
	genBudget = 4000
	// genLimit bounds the subschema generations of all rounds together, and
	// with it the work a hostile schema can cause.
	genLimit = 50_000
	// textLimit bounds the string bytes of all rounds together.
	textLimit = 1 << 20
	// maxCount caps the items of an array and the members of an object.
	maxCount = 10_000
	// refLimit bounds $ref and allOf chains that do not consume the instance.
	refLimit = 64
	// maxRounds bounds how often one answer is generated and validated.
	maxRounds = 16
	// maxTries is how often the errors at one place change its value before
	// it is left out (an optional member) or its parent changes instead.
	maxTries = 3
	// MaxAnswerBytes bounds one generated value: a schema whose values are
	// all larger is refused (ErrTooLarge) rather than answered.
	MaxAnswerBytes = 1 << 20
)

// ErrTooLarge is the error of a schema no value of which fits in
// MaxAnswerBytes.
var ErrTooLarge = fmt.Errorf("the schema asks for a value larger than the %d bytes an offline answer may weigh", MaxAnswerBytes)

// generate returns a value for the JSON Schema raw, whose compiled form is
// compiled, and whether it validates. seed varies free-form strings. It
// builds a value from the schema's keywords and validates it with compiled;
// while the validator finds errors it builds again, with other choices (a
// variant, an anyOf/oneOf/if branch, an optional member left out) at the
// places the errors point to, at most maxRounds times. When no value
// validates it returns the one with the fewest errors. toolArgs says the
// value is a tool call's arguments: the root gets {"type":"object"}, as
// arguments are always objects, and the schema's examples are not copied —
// an example answers the question of whoever wrote the schema, not the
// user's, so strings come from the user's text (seed) instead. The same
// arguments always give the same bytes.
func generate(ctx context.Context, compiled *sampler.Schema, raw json.RawMessage, seed string, toolArgs bool) (json.RawMessage, bool, error) {
	doc, err := decodeSchema(raw)
	if err != nil {
		return nil, false, fmt.Errorf("offline: schema: %w", err)
	}
	g := &generator{doc: doc, seed: seed, words: contentWords(seed), noExamples: toolArgs, tries: map[string]int{},
		optional: map[string]bool{}, dropped: map[string]bool{}, regexps: map[string]*regexp.Regexp{}}
	nodes := []*schema{doc.root}
	if toolArgs {
		nodes = append(nodes, &schema{Type: "object"})
	}
	var best json.RawMessage
	fewest := 0
	for range maxRounds {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		g.budget = genBudget
		clear(g.optional)
		val, _ := g.gen(conj{nodes: nodes}, state{variant: g.tries[""]})
		if len(val) > MaxAnswerBytes {
			// Generating again leaves out optional parts only; what the
			// schema requires stays as large.
			if best == nil {
				return nil, false, ErrTooLarge
			}
			break
		}
		errs := compiled.Validate(val)
		if len(errs) == 0 {
			return val, true, nil
		}
		if best == nil || len(errs) < fewest {
			best, fewest = val, len(errs)
		}
		if g.total > genLimit || g.text > textLimit {
			break
		}
		g.steer(errs)
	}
	return best, false, nil
}

// generator builds values for the subschemas of one document.
type generator struct {
	doc   *document
	seed  string
	words []string
	// noExamples leaves the schemas' examples out of the values tried.
	noExamples bool
	// budget counts down the generations of this round; total and text
	// count the generations and string bytes of all rounds.
	budget, total, text int
	// tries counts, per place (a JSON Pointer), the rounds whose errors
	// pointed there; it raises the variant generated there.
	tries map[string]int
	// optional holds the places of this round's optional object members,
	// dropped those left out for good.
	optional, dropped map[string]bool
	// regexps caches compiled patterns; nil marks one Go cannot compile,
	// which then matches everything.
	regexps map[string]*regexp.Regexp
}

// steer records the places the validation errors point to, so that the
// next round generates something else there. A place that failed maxTries
// times is left out when it is an optional member, else its parent changes.
func (g *generator) steer(errs []sampler.FieldError) {
	seen := map[string]bool{}
	for _, e := range errs {
		p := e.Path // a JSON Pointer; the validator writes the root as "/"
		if p == "/" || !strings.HasPrefix(p, "/") {
			p = ""
		}
		for p != "" && g.tries[p] >= maxTries && !g.optional[p] {
			p = p[:strings.LastIndexByte(p, '/')]
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		if g.tries[p] >= maxTries && g.optional[p] {
			g.dropped[p] = true
			continue
		}
		g.tries[p]++
	}
}

// matchPattern reports whether s matches p; patterns Go cannot compile match.
func (g *generator) matchPattern(p, s string) bool {
	re, ok := g.regexps[p]
	if !ok {
		re, _ = regexp.Compile(p)
		g.regexps[p] = re
	}
	return re == nil || re.MatchString(s)
}

// groupKey names one anyOf, oneOf or if keyword of one schema.
type groupKey struct {
	node *schema
	kw   string
}

// conj is a conjunction of subschemas a value must satisfy. decided holds
// the anyOf/oneOf/if groups whose branch was already added to nodes.
type conj struct {
	nodes   []*schema
	decided map[groupKey]bool
}

// with returns c plus branch, with the group key decided.
func (c conj) with(branch *schema, key groupKey) conj {
	nodes := make([]*schema, 0, len(c.nodes)+1)
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
	path    string // JSON Pointer of the value
	hint    string // name of the property the value is stored under
	variant int    // selects among alternative values
}

// child returns the state of the member or item seg of st, its variant
// raised by the tries of its place.
func (g *generator) child(st state, seg, hint string, variant int) state {
	path := st.path + "/" + seg
	return state{depth: st.depth + 1, path: path, hint: hint, variant: variant + g.tries[path]}
}

type group struct {
	key      groupKey
	branches []*schema
}

// closedRule is the additionalProperties of one schema: names it declares
// or matches by pattern are free, others must satisfy addl.
type closedRule struct {
	props, patterns members
	addl            *schema
}

type patProp struct {
	pattern string
	schema  *schema
}

// view is the flattened constraints of a conjunction: $ref and allOf are
// merged, anyOf/oneOf/if are left as groups to branch on.
type view struct {
	unsat     bool
	types     int
	typeOrder []string
	consts    []json.RawMessage
	enums     [][]json.RawMessage
	samples   []json.RawMessage

	lo, hi         *big.Rat
	loExcl, hiExcl bool
	mults          []*big.Rat

	minLen, maxLen int
	patterns       []string
	format         string

	prefix             [][]*schema
	items              []*schema
	minItems, maxItems int
	unique             bool
	contains           []*schema

	propOrder          []string
	props              map[string][]*schema
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
		props:       map[string][]*schema{},
		requiredSet: map[string]bool{},
		depReq:      map[string][]string{},
	}
	for _, n := range c.nodes {
		g.addNode(v, n, c, 0)
	}
	return v
}

// addNode merges the keywords of s into v.
func (g *generator) addNode(v *view, s *schema, c conj, refDepth int) {
	if s == nil || refDepth > refLimit {
		return
	}
	if s.never {
		v.unsat = true
		return
	}
	for _, ref := range []string{s.Ref, s.DynamicRef} {
		if ref != "" {
			g.addNode(v, g.doc.resolve(ref), c, refDepth+1)
		}
	}
	if s.Type != nil {
		types := typeNames(s.Type)
		v.types &= typeMask(types)
		if v.typeOrder == nil {
			v.typeOrder = types
		}
	}
	if s.Const != nil {
		v.consts = append(v.consts, s.Const)
	}
	if s.Enum != nil {
		v.enums = append(v.enums, s.Enum)
	}
	examples := s.Examples
	if g.noExamples {
		examples = nil
	}
	if len(examples) > 0 {
		v.samples = append(v.samples, examples[0])
	}
	if s.Default != nil {
		v.samples = append(v.samples, s.Default)
	}
	if len(examples) > 1 {
		v.samples = append(v.samples, examples[1:]...)
	}
	addNumeric(v, s)
	addString(v, s)
	addArray(v, s)
	addObject(v, s)
	for _, sub := range s.AllOf {
		g.addNode(v, sub, c, refDepth+1)
	}
	for _, grp := range []group{{groupKey{s, "anyOf"}, s.AnyOf}, {groupKey{s, "oneOf"}, s.OneOf}} {
		if len(grp.branches) > 0 && !c.decided[grp.key] {
			v.groups = append(v.groups, grp)
		}
	}
	if key := (groupKey{s, "if"}); s.If != nil && !c.decided[key] {
		// The second branch cannot say "not if": the validator checks it.
		then, els := s.Then, s.Else
		if then == nil {
			then = &schema{}
		}
		if els == nil {
			els = &schema{}
		}
		v.groups = append(v.groups, group{key: key, branches: []*schema{{AllOf: []*schema{s.If, then}}, els}})
	}
}

func addNumeric(v *view, s *schema) {
	bounds := []struct {
		n         json.Number
		set       func(*view, *big.Rat, bool)
		exclusive bool
	}{{s.Minimum, setLower, false}, {s.Maximum, setUpper, false}, {s.ExclusiveMinimum, setLower, true}, {s.ExclusiveMaximum, setUpper, true}}
	for _, b := range bounds {
		if m, ok := ratOf(b.n); ok {
			v.numberKw = true
			b.set(v, m, b.exclusive)
		}
	}
	if m, ok := ratOf(s.MultipleOf); ok && m.Sign() > 0 {
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

// count returns a count keyword (minLength, maxItems, …) capped to keep
// loops bounded; ok is false when the schema has none.
func count(n *int) (int, bool) {
	if n == nil || *n < 0 {
		return 0, false
	}
	return min(*n, 1_000_000), true
}

// tighterMax combines two upper bounds; cur < 0 means none yet.
func tighterMax(cur, m int) int {
	if cur < 0 || m < cur {
		return m
	}
	return cur
}

func addString(v *view, s *schema) {
	if m, ok := count(s.MinLength); ok {
		v.stringKw = true
		v.minLen = max(v.minLen, m)
	}
	if m, ok := count(s.MaxLength); ok {
		v.stringKw = true
		v.maxLen = tighterMax(v.maxLen, m)
	}
	if s.Pattern != "" {
		v.stringKw = true
		v.patterns = append(v.patterns, s.Pattern)
	}
	if s.Format != "" && v.format == "" {
		v.stringKw = true
		v.format = s.Format
	}
}

func addArray(v *view, s *schema) {
	if s.PrefixItems != nil {
		v.arrayKw = true
		for i, p := range s.PrefixItems {
			if i == len(v.prefix) {
				v.prefix = append(v.prefix, nil)
			}
			v.prefix[i] = append(v.prefix[i], p)
		}
	}
	if s.Items != nil {
		v.arrayKw = true
		v.items = append(v.items, s.Items)
	}
	if m, ok := count(s.MinItems); ok {
		v.arrayKw = true
		v.minItems = max(v.minItems, m)
	}
	if m, ok := count(s.MaxItems); ok {
		v.arrayKw = true
		v.maxItems = tighterMax(v.maxItems, m)
	}
	if s.UniqueItems {
		v.arrayKw = true
		v.unique = true
	}
	if s.Contains != nil {
		v.arrayKw = true
		v.contains = append(v.contains, s.Contains)
	}
}

func addObject(v *view, s *schema) {
	if s.Properties.byName != nil {
		v.objectKw = true
		for _, k := range s.Properties.names {
			if _, seen := v.props[k]; !seen {
				v.propOrder = append(v.propOrder, k)
			}
			v.props[k] = append(v.props[k], s.Properties.byName[k])
		}
	}
	if s.Required != nil {
		v.objectKw = true
		for _, name := range s.Required {
			if !v.requiredSet[name] {
				v.requiredSet[name] = true
				v.required = append(v.required, name)
			}
		}
	}
	if s.PatternProperties.byName != nil {
		v.objectKw = true
		for _, p := range s.PatternProperties.names {
			v.patProps = append(v.patProps, patProp{pattern: p, schema: s.PatternProperties.byName[p]})
		}
	}
	if s.AdditionalProperties != nil {
		v.objectKw = true
		v.closed = append(v.closed, closedRule{props: s.Properties, patterns: s.PatternProperties, addl: s.AdditionalProperties})
	}
	if m, ok := count(s.MinProperties); ok {
		v.objectKw = true
		v.minProps = max(v.minProps, m)
	}
	if m, ok := count(s.MaxProperties); ok {
		v.objectKw = true
		v.maxProps = tighterMax(v.maxProps, m)
	}
	for k, names := range s.DependentRequired {
		v.objectKw = true
		v.depReq[k] = append(v.depReq[k], names...)
	}
	for k, dep := range s.Dependencies {
		v.objectKw = true
		var names []string
		if json.Unmarshal(dep, &names) == nil { // else a schema, left to the validator
			v.depReq[k] = append(v.depReq[k], names...)
		}
	}
}

// gen returns a value for c. ok is false when it could not build one that
// satisfies the keywords it reads; the validator judges the rest.
func (g *generator) gen(c conj, st state) ([]byte, bool) {
	g.budget--
	g.total++
	if st.depth > maxDepth || g.total > genLimit {
		return []byte("null"), false
	}
	return g.genView(g.flatten(c), c, st)
}

// genView builds the value of the flattened view v of c.
func (g *generator) genView(v *view, c conj, st state) ([]byte, bool) {
	if v.unsat || v.types == 0 {
		return []byte("null"), false
	}
	if len(v.groups) > 0 {
		// The variant picks the branch, starting a round robin over the
		// branches that can be built; what is left of it varies the value.
		grp := v.groups[0]
		branches := grp.branches
		if st.depth >= optionalDepth {
			branches = g.leanFirst(c, grp)
		}
		n := len(branches)
		s := st
		s.variant = st.variant / n
		var first []byte
		for i := range n {
			val, ok := g.gen(c.with(branches[(st.variant+i)%n], grp.key), s)
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
		return sampler.CompactJSON(v.consts[0]), true
	}
	if len(v.enums) > 0 {
		var cands [][]byte
		for _, m := range v.enums[0] {
			m = sampler.CompactJSON(m)
			inAll := true
			for _, e := range v.enums[1:] {
				inAll = inAll && containsJSON(e, m)
			}
			if inAll {
				cands = append(cands, m)
			}
		}
		if len(cands) == 0 {
			return []byte("null"), false
		}
		return cands[st.variant%len(cands)], true
	}
	if st.variant < len(v.samples) {
		return sampler.CompactJSON(v.samples[st.variant]), true
	}
	st.variant -= len(v.samples)
	switch chooseType(v) {
	case "null":
		return []byte("null"), true
	case "boolean":
		return strconv.AppendBool(nil, st.variant%2 == 0), true
	case "integer":
		return g.genNumber(v, true, st)
	case "number":
		return g.genNumber(v, false, st)
	case "array":
		return g.genArray(v, st)
	case "object":
		return g.genObject(v, st)
	}
	if g.text+v.minLen > textLimit {
		return []byte(`""`), false
	}
	s, ok := g.genString(v, st)
	g.text += len(s)
	return jsonString(s), ok
}

// leanFirst orders the branches of grp so that those giving scalars come
// before those giving objects or arrays, which deep inside recursive
// schemas keeps values from growing without end.
func (g *generator) leanFirst(c conj, grp group) []*schema {
	var lean, rich []*schema
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

// typeNames returns the names a type keyword lists.
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

// typeMask returns the mask of the type names of a type keyword.
func typeMask(types []string) int {
	m := 0
	for _, t := range types {
		m |= typeBits(t)
	}
	return m
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

// containsJSON reports whether list holds the compact JSON value m. Values
// compare by their compact text: 1 and 1.0 differ here (not for the
// validator, which then asks for another value).
func containsJSON(list []json.RawMessage, m []byte) bool {
	for _, e := range list {
		if bytes.Equal(sampler.CompactJSON(e), m) {
			return true
		}
	}
	return false
}

// jsonString returns s as a JSON string, without the HTML escaping of
// json.Marshal.
func jsonString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// genArray builds an array: the prefixItems, one item (or minItems items)
// of items, unique when uniqueItems asks, the last one matching contains.
func (g *generator) genArray(v *view, st state) ([]byte, bool) {
	if v.minItems > maxCount || (v.maxItems >= 0 && v.minItems > v.maxItems) {
		return []byte("[]"), false
	}
	itemsFalse := false
	for _, it := range v.items {
		itemsFalse = itemsFalse || it.never
	}
	n := 0
	if st.depth < optionalDepth && g.budget > 0 {
		n = len(v.prefix)
		if n == 0 && !itemsFalse {
			n = 1
		}
	}
	if len(v.contains) > 0 && !(itemsFalse && len(v.prefix) == 0) {
		n = max(n, 1)
	}
	n = max(n, v.minItems)
	if v.maxItems >= 0 {
		n = min(n, v.maxItems)
	}
	if itemsFalse {
		n = min(n, len(v.prefix))
	}
	arr := make([][]byte, 0, n)
	ok := true
	for i := range n {
		nodes := v.items
		if i < len(v.prefix) {
			nodes = v.prefix[i]
		}
		if i == n-1 && len(v.contains) > 0 {
			nodes = append(append([]*schema{}, nodes...), v.contains...)
		}
		// Items vary only when they must differ.
		variant := st.variant
		if v.unique {
			variant += i
		}
		val, good := g.arrayItem(v, arr, nodes, g.child(st, strconv.Itoa(i), st.hint, variant))
		ok = ok && good
		arr = append(arr, val)
	}
	return append(append([]byte{'['}, bytes.Join(arr, []byte{','})...), ']'), ok
}

// arrayItem generates one item, retrying variants while uniqueItems finds
// it among prev.
func (g *generator) arrayItem(v *view, prev [][]byte, nodes []*schema, st state) ([]byte, bool) {
	dup := func(val []byte) bool {
		return v.unique && slices.ContainsFunc(prev, func(p []byte) bool { return bytes.Equal(p, val) })
	}
	val, ok := g.gen(conj{nodes: nodes}, st)
	for j := 1; dup(val) && j < 16; j++ {
		s := st
		s.variant = st.variant + j*len(prev) + j
		val, ok = g.gen(conj{nodes: nodes}, s)
	}
	return val, ok && !dup(val)
}

// propNodes returns the schemas a member named k must satisfy.
func (g *generator) propNodes(v *view, k string) []*schema {
	nodes := append([]*schema{}, v.props[k]...)
	for _, pp := range v.patProps {
		if g.matchPattern(pp.pattern, k) {
			nodes = append(nodes, pp.schema)
		}
	}
	for _, rule := range v.closed {
		if _, ok := rule.props.get(k); ok {
			continue
		}
		matched := false
		for _, p := range rule.patterns.names {
			matched = matched || g.matchPattern(p, k)
		}
		if !matched {
			nodes = append(nodes, rule.addl)
		}
	}
	return nodes
}

// object is a JSON object being built, its members in order.
type object struct {
	buf []byte
	has map[string]bool
}

func (o *object) add(k string, val []byte) {
	if len(o.has) > 0 {
		o.buf = append(o.buf, ',')
	}
	o.buf = append(append(append(o.buf, jsonString(k)...), ':'), val...)
	o.has[k] = true
}

// genObject builds an object with every required property and, above
// optionalDepth, every declared optional one, in declaration order.
func (g *generator) genObject(v *view, st state) ([]byte, bool) {
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
				if !include[d] && !slices.Contains(extra, d) {
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
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range v.propOrder {
		for _, d := range v.depReq[k] {
			if include[k] && include[d] && !slices.Contains(keys, d) {
				keys = append(keys, d)
			}
		}
	}
	o := &object{buf: []byte{'{'}, has: map[string]bool{}}
	ok := true
	for _, k := range keys {
		cst := g.child(st, jsonpointer.EscapeToken(k), k, st.variant)
		optional := !must[k] && !dependedOn(v, keys, k)
		if optional && g.dropped[cst.path] {
			continue
		}
		val, good := g.gen(conj{nodes: g.propNodes(v, k)}, cst)
		if optional {
			if !good {
				continue // leave out an optional property that cannot be built
			}
			g.optional[cst.path] = true
		}
		ok = ok && good
		o.add(k, val)
	}
	if len(o.has) < v.minProps {
		ok = g.fillProperties(v, o, st) && ok
	}
	return append(o.buf, '}'), ok
}

// dependedOn reports whether some key of keys requires k.
func dependedOn(v *view, keys []string, k string) bool {
	for _, key := range keys {
		if slices.Contains(v.depReq[key], k) {
			return true
		}
	}
	return false
}

// fillProperties adds members until o has minProperties: declared optional
// properties first, then names matching patternProperties, then extraN.
func (g *generator) fillProperties(v *view, o *object, st state) bool {
	try := func(k string) {
		if o.has[k] || len(o.has) >= v.minProps {
			return
		}
		cst := g.child(st, jsonpointer.EscapeToken(k), k, st.variant)
		if g.dropped[cst.path] {
			return
		}
		if val, ok := g.gen(conj{nodes: g.propNodes(v, k)}, cst); ok {
			g.optional[cst.path] = true
			o.add(k, val)
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
		for choice := 0; choice < v.minProps+4 && len(o.has) < v.minProps; choice++ {
			if k, ok := patternString(re, 1, choice); ok && g.matchPattern(pp.pattern, k) {
				try(k)
			}
		}
	}
	for i := 1; len(o.has) < v.minProps && i <= min(v.minProps, maxCount)+16; i++ {
		try("extra" + strconv.Itoa(i))
	}
	return len(o.has) >= v.minProps
}
