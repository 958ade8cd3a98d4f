package offline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
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
	// maxMin caps the lower bounds minLength, minItems and minProperties,
	// so that sums of them cannot overflow.
	maxMin = 1_000_000
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
	g := &generator{seed: seed, words: contentWords(seed), noExamples: toolArgs, names: map[string]*schema{},
		refs: map[string]*schema{}, tries: map[string]int{}, optional: map[string]bool{}, dropped: map[string]bool{},
		regexps: map[string]*regexp.Regexp{}}
	if err := json.Unmarshal(raw, &g.root); err != nil {
		return nil, false, fmt.Errorf("offline: schema: %w", err)
	}
	g.index(g.root)
	nodes := []*schema{g.root}
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
	root *schema
	// names holds the subschemas by $id (and its last path segment) and by
	// "#" and an $anchor or $dynamicAnchor; the first one wins.
	names map[string]*schema
	// refs holds the resolved $ref values; nil marks one that does not
	// resolve.
	refs  map[string]*schema
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

// group is an anyOf, oneOf or if keyword: a value satisfies one of its
// branches.
type group struct {
	key      groupKey
	branches []*schema
}

// conj is a conjunction of subschemas a value must satisfy. decided holds
// the anyOf/oneOf/if groups whose branch was already added to nodes.
type conj struct {
	nodes   []*schema
	decided map[groupKey]bool
}

// with returns c plus branch, with the group key decided.
func (c conj) with(branch *schema, key groupKey) conj {
	decided := maps.Clone(c.decided)
	if decided == nil {
		decided = map[groupKey]bool{}
	}
	decided[key] = true
	return conj{nodes: append(slices.Clip(c.nodes), branch), decided: decided}
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

// view is the flattened constraints of a conjunction: $ref and allOf are
// merged, anyOf/oneOf/if are left as groups to branch on. Upper bounds
// are math.MaxInt when absent.
type view struct {
	unsat bool
	// types lists the types allowed, in the order of the first type
	// keyword; nil allows all, and then implied is the lowest rank of the
	// types keywords imply (see schema.implied).
	types   []string
	implied int
	consts  []json.RawMessage
	enums   [][]json.RawMessage
	samples []json.RawMessage

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

	propOrder []string
	props     map[string][]*schema
	required  []string
	// objects holds the schemas with patternProperties or
	// additionalProperties.
	objects            []*schema
	minProps, maxProps int
	depReq             map[string][]string

	groups []group
}

func (g *generator) flatten(c conj) *view {
	v := &view{maxLen: math.MaxInt, maxItems: math.MaxInt, maxProps: math.MaxInt, implied: 4,
		props: map[string][]*schema{}, depReq: map[string][]string{}}
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
			g.addNode(v, g.resolve(ref), c, refDepth+1)
		}
	}
	if s.Type != nil {
		v.types = intersect(v.types, typeNames(s.Type))
	}
	v.implied = min(v.implied, s.implied())
	if s.Const != nil {
		v.consts = append(v.consts, s.Const)
	}
	if s.Enum != nil {
		v.enums = append(v.enums, s.Enum)
	}
	// Samples: the first example, the default, the other examples.
	examples := s.Examples
	if g.noExamples {
		examples = nil
	}
	v.samples = append(v.samples, examples[:min(1, len(examples))]...)
	if s.Default != nil {
		v.samples = append(v.samples, s.Default)
	}
	v.samples = append(v.samples, examples[min(1, len(examples)):]...)

	bounds := []struct {
		n           json.Number
		lower, excl bool
	}{{s.Minimum, true, false}, {s.Maximum, false, false}, {s.ExclusiveMinimum, true, true}, {s.ExclusiveMaximum, false, true}}
	for _, b := range bounds {
		if m, ok := ratOf(b.n); ok && b.lower {
			v.lo, v.loExcl = tighter(v.lo, v.loExcl, m, b.excl, 1)
		} else if ok {
			v.hi, v.hiExcl = tighter(v.hi, v.hiExcl, m, b.excl, -1)
		}
	}
	if m, ok := ratOf(s.MultipleOf); ok && m.Sign() > 0 {
		v.mults = append(v.mults, m)
	}

	v.minLen = max(v.minLen, lower(s.MinLength))
	v.maxLen = min(v.maxLen, upper(s.MaxLength))
	if s.Pattern != "" {
		v.patterns = append(v.patterns, s.Pattern)
	}
	v.format = cmp.Or(v.format, s.Format)

	for i, p := range s.PrefixItems {
		if i == len(v.prefix) {
			v.prefix = append(v.prefix, nil)
		}
		v.prefix[i] = append(v.prefix[i], p)
	}
	if s.Items != nil {
		v.items = append(v.items, s.Items)
	}
	v.minItems = max(v.minItems, lower(s.MinItems))
	v.maxItems = min(v.maxItems, upper(s.MaxItems))
	v.unique = v.unique || s.UniqueItems
	if s.Contains != nil {
		v.contains = append(v.contains, s.Contains)
	}

	for _, k := range s.Properties.names {
		if _, seen := v.props[k]; !seen {
			v.propOrder = append(v.propOrder, k)
		}
		v.props[k] = append(v.props[k], s.Properties.byName[k])
	}
	for _, k := range s.Required {
		if !slices.Contains(v.required, k) {
			v.required = append(v.required, k)
		}
	}
	if s.PatternProperties.byName != nil || s.AdditionalProperties != nil {
		v.objects = append(v.objects, s)
	}
	v.minProps = max(v.minProps, lower(s.MinProperties))
	v.maxProps = min(v.maxProps, upper(s.MaxProperties))
	for k, names := range s.DependentRequired {
		v.depReq[k] = append(v.depReq[k], names...)
	}
	for k, dep := range s.Dependencies {
		var names []string
		if json.Unmarshal(dep, &names) == nil { // else a schema, left to the validator
			v.depReq[k] = append(v.depReq[k], names...)
		}
	}

	for _, sub := range s.AllOf {
		g.addNode(v, sub, c, refDepth+1)
	}
	groups := []group{{groupKey{s, "anyOf"}, s.AnyOf}, {groupKey{s, "oneOf"}, s.OneOf}}
	if s.If != nil {
		// The second branch cannot say "not if": the validator checks it.
		then := &schema{AllOf: []*schema{s.If, cmp.Or(s.Then, &schema{})}}
		groups = append(groups, group{groupKey{s, "if"}, []*schema{then, cmp.Or(s.Else, &schema{})}})
	}
	for _, grp := range groups {
		if len(grp.branches) > 0 && !c.decided[grp.key] {
			v.groups = append(v.groups, grp)
		}
	}
}

// lower returns a lower bound such as minLength, 0 when absent.
func lower(n *int) int {
	if n == nil {
		return 0
	}
	return min(*n, maxMin)
}

// upper returns an upper bound such as maxLength, math.MaxInt when absent.
func upper(n *int) int {
	if n == nil {
		return math.MaxInt
	}
	return *n
}

// tighter returns the tighter of the bounds cur (nil: none) and m, and
// whether it is exclusive; sign is 1 for lower bounds, -1 for upper ones.
func tighter(cur *big.Rat, curExcl bool, m *big.Rat, excl bool, sign int) (*big.Rat, bool) {
	if cur == nil || m.Cmp(cur)*sign > 0 {
		return m, excl
	}
	return cur, curExcl || excl && m.Cmp(cur) == 0
}

// intersect returns the types of have (nil: all) that add allows too, an
// integer being a number.
func intersect(have, add []string) []string {
	if have == nil {
		return add
	}
	out := []string{}
	for _, t := range have {
		switch {
		case slices.Contains(add, t):
			out = append(out, t)
		case t == "number" && slices.Contains(add, "integer"), t == "integer" && slices.Contains(add, "number"):
			out = append(out, "integer")
		}
	}
	return out
}

// chooseType picks the JSON type to generate: the first non-null type the
// schema lists that the conjunction allows, else one the keywords imply.
func chooseType(v *view) string {
	if v.types != nil {
		for _, t := range v.types {
			if t != "null" {
				return t
			}
		}
		return "null"
	}
	return [...]string{"object", "array", "string", "number", "string"}[v.implied]
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
	if v.unsat || v.types != nil && len(v.types) == 0 {
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
		// Members of the first enum that every other enum lists; values
		// compare by their compact text: 1 and 1.0 differ here (not for
		// the validator, which then asks for another value).
		var cands [][]byte
		for _, m := range v.enums[0] {
			m = sampler.CompactJSON(m)
			if !slices.ContainsFunc(v.enums[1:], func(e []json.RawMessage) bool {
				return !slices.ContainsFunc(e, func(x json.RawMessage) bool { return bytes.Equal(sampler.CompactJSON(x), m) })
			}) {
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
		return genNumber(v, true, st.variant)
	case "number":
		return genNumber(v, false, st.variant)
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
	if v.minItems > min(v.maxItems, maxCount) {
		return []byte("[]"), false
	}
	itemsFalse := slices.ContainsFunc(v.items, func(s *schema) bool { return s.never })
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
	n = min(max(n, v.minItems), v.maxItems)
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
			nodes = slices.Concat(nodes, v.contains)
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
	nodes := slices.Clone(v.props[k])
	for _, s := range v.objects {
		matched := false
		for _, p := range s.PatternProperties.names {
			if g.matchPattern(p, k) {
				matched = true
				nodes = append(nodes, s.PatternProperties.byName[p])
			}
		}
		if _, declared := s.Properties.byName[k]; !declared && !matched && s.AdditionalProperties != nil {
			nodes = append(nodes, s.AdditionalProperties)
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

// genObject builds an object with every required property and those they
// depend on and, above optionalDepth, every declared optional one with its
// dependencies, declared properties first, in declaration order.
func (g *generator) genObject(v *view, st state) ([]byte, bool) {
	var keys []string
	add := func(k string) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range v.required {
		add(k)
	}
	for i := 0; i < len(keys); i++ { // dependentRequired closure; keys grows
		for _, d := range v.depReq[keys[i]] {
			add(d)
		}
	}
	for _, k := range v.propOrder {
		if st.depth >= optionalDepth || g.budget <= 0 || slices.Contains(keys, k) {
			continue
		}
		var extra []string
		for _, d := range append([]string{k}, v.depReq[k]...) {
			if !slices.Contains(keys, d) && !slices.Contains(extra, d) {
				extra = append(extra, d)
			}
		}
		if len(keys)+len(extra) <= v.maxProps {
			keys = append(keys, extra...)
		}
	}
	rank := func(k string) int {
		if i := slices.Index(v.propOrder, k); i >= 0 {
			return i
		}
		return len(v.propOrder)
	}
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	needed := map[string]bool{} // members another member requires
	for _, k := range keys {
		for _, d := range v.depReq[k] {
			needed[d] = true
		}
	}
	o := &object{buf: []byte{'{'}, has: map[string]bool{}}
	ok := true
	for _, k := range keys {
		if !slices.Contains(v.required, k) && !needed[k] {
			g.addOptional(v, o, st, k)
			continue
		}
		val, good := g.gen(conj{nodes: g.propNodes(v, k)}, g.child(st, jsonpointer.EscapeToken(k), k, st.variant))
		ok = ok && good
		o.add(k, val)
	}
	if len(o.has) < v.minProps {
		ok = g.fillProperties(v, o, st) && ok
	}
	return append(o.buf, '}'), ok
}

// addOptional adds the optional member k to o unless it was dropped or
// cannot be built.
func (g *generator) addOptional(v *view, o *object, st state, k string) {
	cst := g.child(st, jsonpointer.EscapeToken(k), k, st.variant)
	if g.dropped[cst.path] {
		return
	}
	if val, ok := g.gen(conj{nodes: g.propNodes(v, k)}, cst); ok {
		g.optional[cst.path] = true
		o.add(k, val)
	}
}

// fillProperties adds members until o has minProperties: declared optional
// properties first, then names matching patternProperties, then extraN.
func (g *generator) fillProperties(v *view, o *object, st state) bool {
	try := func(k string) {
		if !o.has[k] && len(o.has) < v.minProps {
			g.addOptional(v, o, st, k)
		}
	}
	for _, k := range v.propOrder {
		try(k)
	}
	for _, s := range v.objects {
		for _, p := range s.PatternProperties.names {
			re, err := syntax.Parse(p, syntax.Perl)
			for choice := 0; err == nil && choice < min(v.minProps, maxCount)+4 && len(o.has) < v.minProps; choice++ {
				if k, ok := patternString(re, 1, choice); ok && g.matchPattern(p, k) {
					try(k)
				}
			}
		}
	}
	for i := 1; len(o.has) < v.minProps && i <= min(v.minProps, maxCount)+16; i++ {
		try("extra" + strconv.Itoa(i))
	}
	return len(o.has) >= v.minProps
}
