package offline

import (
	"encoding/binary"
	"hash/fnv"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// genString builds a string: a format value, a pattern match or free text
// derived from the seed, within the length bounds.
func (g *generator) genString(v *view, st state) (string, bool) {
	if v.maxLen >= 0 && v.minLen > v.maxLen {
		return "", false
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

// stringFits reports whether s has the length and patterns v asks for.
func (g *generator) stringFits(v *view, s string) bool {
	n := utf8.RuneCountInString(s)
	if n < v.minLen || (v.maxLen >= 0 && n > v.maxLen) {
		return false
	}
	for _, p := range v.patterns {
		if !g.matchPattern(p, s) {
			return false
		}
	}
	return true
}

// patternValue returns the variant-th distinct string that matches every
// pattern of v and fits its bounds, trying free text, words of the seed and
// strings built from the first pattern.
func (g *generator) patternValue(v *view, st state) (string, bool) {
	var cands []string
	add := func(s string) bool {
		if g.stringFits(v, s) && !slices.Contains(cands, s) {
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
			return fallback, false
		}
	}
	if len(cands) == 0 {
		return fitLength(g.freeText(st), v.minLen, v.maxLen, st.variant), false
	}
	return cands[st.variant%len(cands)], true
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
	case has("expression", "formula", "equation", "arithmetic", "math", "calc"):
		// The arithmetic the user wrote, else the whole text (which a
		// calculator then refuses).
		if e := arithmetic(g.seed); e != "" {
			return e
		}
		if g.seed != "" {
			return clipRunes(strings.Join(strings.Fields(g.seed), " "), 200)
		}
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

// arithmetic returns the one stretch of s made of digits, decimal points,
// spaces, parentheses and the operators + - * / % ^ that holds a digit,
// trimmed of spaces, of a sentence's final period and of parentheses left
// unbalanced at its ends: "Please calculate 2 * (3 + 4)." gives
// "2 * (3 + 4)". It returns "" when s holds no such stretch, or several
// ("add 2 and 3"): which one is meant, or how they combine, is a guess.
func arithmetic(s string) string {
	isArith := func(r rune) bool {
		return r >= '0' && r <= '9' || strings.ContainsRune(".+-*/%^() \t", r)
	}
	best := ""
	for start := 0; start < len(s); {
		end := start
		for end < len(s) && isArith(rune(s[end])) {
			end++
		}
		if end == start {
			start++
			continue
		}
		run := strings.TrimSpace(s[start:end])
		run = strings.TrimSpace(strings.TrimRight(run, "."))
		run = trimUnbalanced(run)
		if strings.ContainsAny(run, "0123456789") {
			if best != "" {
				return ""
			}
			best = run
		}
		start = end
	}
	return best
}

// trimUnbalanced drops opening parentheses at the end of s and closing ones
// at its start, and an outer ( or ) that has no partner.
func trimUnbalanced(s string) string {
	for {
		t := strings.TrimSpace(strings.TrimLeft(strings.TrimRight(s, "( "), ") "))
		if open, closed := strings.Count(t, "("), strings.Count(t, ")"); open > closed && strings.HasPrefix(t, "(") {
			t = t[1:]
		} else if closed > open && strings.HasSuffix(t, ")") {
			t = t[:len(t)-1]
		}
		if t == s {
			return s
		}
		s = t
	}
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
