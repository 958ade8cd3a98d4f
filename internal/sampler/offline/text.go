package offline

import (
	"cmp"
	"encoding/binary"
	"fmt"
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
	if v.minLen > v.maxLen {
		return "", false
	}
	if s, ok := formatValue(v.format, g.seed+st.path, st.variant); ok && g.stringFits(v, s) {
		return s, true
	}
	if len(v.patterns) > 0 {
		return g.patternValue(v, st)
	}
	return fitLength(g.freeText(st), v.minLen, v.maxLen, st.variant), true
}

// stringFits reports whether s has the length and patterns v asks for.
func (g *generator) stringFits(v *view, s string) bool {
	n := utf8.RuneCountInString(s)
	return n >= v.minLen && n <= v.maxLen && !slices.ContainsFunc(v.patterns, func(p string) bool { return !g.matchPattern(p, s) })
}

// patternValue returns the variant-th distinct string that matches every
// pattern of v and fits its bounds, trying free text, words of the seed and
// strings built from the first pattern.
func (g *generator) patternValue(v *view, st state) (string, bool) {
	var cands []string
	// found adds s to cands if it fits and reports whether cands is long
	// enough.
	found := func(s string) bool {
		if g.stringFits(v, s) && !slices.Contains(cands, s) {
			cands = append(cands, s)
		}
		return len(cands) > st.variant
	}
	if found(fitLength(g.freeText(st), v.minLen, v.maxLen, 0)) || slices.ContainsFunc(g.words, found) {
		return cands[st.variant], true
	}
	if re, err := syntax.Parse(v.patterns[0], syntax.Perl); err == nil {
		built := ""
		for choice := 0; choice < st.variant+4; choice++ {
			for _, rep := range []int{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128} {
				s, ok := patternString(re, rep, choice)
				if !ok {
					continue
				}
				built = cmp.Or(built, s)
				// Unanchored patterns match inside longer strings too.
				if found(s) || found(s+strings.Repeat("x", max(0, v.minLen-utf8.RuneCountInString(s)))) {
					return cands[st.variant], true
				}
			}
		}
		if len(cands) == 0 && built != "" {
			return built, false
		}
	}
	if len(cands) == 0 {
		return fitLength(g.freeText(st), v.minLen, v.maxLen, st.variant), false
	}
	return cands[st.variant%len(cands)], true
}

// fitLength pads or cuts s to [minLen, maxLen] runes. Variants above 0 get
// a numeric suffix so that they differ.
func fitLength(s string, minLen, maxLen, variant int) string {
	suffix := ""
	if variant > 0 {
		suffix = " " + strconv.Itoa(variant+1)
	}
	if r := []rune(s); len(r)+len(suffix) > maxLen {
		if maxLen-len(suffix) < 1 && variant > 0 {
			// No room for text and suffix: spell the variant in letters.
			s, suffix = letters(variant), ""
		} else {
			s = strings.TrimRightFunc(string(r[:max(0, maxLen-len(suffix))]), unicode.IsSpace)
		}
	}
	out := s + suffix
	if n := utf8.RuneCountInString(out); n < minLen {
		const filler = " lorem ipsum dolor sit amet consectetur adipiscing elit"
		pad := strings.Repeat(filler, minLen/len(filler)+1)
		if out == "" {
			pad = pad[1:]
		}
		out += pad[:minLen-n]
	}
	return clipRunes(out, maxLen)
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
		return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(hint, w) })
	}
	whole := clipRunes(strings.Join(strings.Fields(g.seed), " "), 200)
	switch {
	case has("expression", "formula", "equation", "arithmetic", "math", "calc"):
		// The arithmetic the user wrote, else the whole text (which a
		// calculator then refuses).
		if whole != "" {
			return cmp.Or(arithmetic(g.seed), whole)
		}
	case hint == "" || has("summary", "description", "text", "content", "message", "body", "answer",
		"reason", "explanation", "comment", "note", "detail", "response", "reply", "query",
		"question", "prompt", "feedback", "analysis", "abstract", "input", "instruction"):
		return cmp.Or(whole, "offline sample text")
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
	if len(g.words) == 0 && st.hint != "" {
		return "example " + st.hint
	} else if len(g.words) == 0 {
		return "example"
	}
	h := fnv.New32a()
	h.Write([]byte(st.path))
	return g.words[h.Sum32()%uint32(len(g.words))]
}

// arithmetic returns the one stretch of s made of digits, decimal points,
// spaces, parentheses and the operators + - * / % ^ that holds a digit,
// trimmed of spaces, of a sentence's final period and of parentheses left
// unbalanced at its ends: "Please calculate 2 * (3 + 4)." gives
// "2 * (3 + 4)". It returns "" when s holds no such stretch, or several
// ("add 2 and 3"): which one is meant, or how they combine, is a guess.
func arithmetic(s string) string {
	best := ""
	for _, run := range strings.FieldsFunc(s, func(r rune) bool {
		return (r < '0' || r > '9') && !strings.ContainsRune(".+-*/%^() \t", r)
	}) {
		run = trimUnbalanced(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(run), ".")))
		if strings.ContainsAny(run, "0123456789") {
			if best != "" {
				return ""
			}
			best = run
		}
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

// notAlnum reports whether r is neither a letter nor a digit.
func notAlnum(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// contentWords returns the words of s that carry meaning: punctuation
// trimmed, stop words and words shorter than 3 letters left out. When none
// is left it returns every word.
func contentWords(s string) []string {
	var all, content []string
	for _, f := range strings.Fields(s) {
		if w := strings.TrimFunc(f, notAlnum); w != "" {
			all = append(all, w)
			if utf8.RuneCountInString(w) >= 3 && !isStopWord(strings.ToLower(w)) {
				content = append(content, w)
			}
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
	sentenceStart := true
	best := ""
	for _, f := range strings.Fields(s) {
		w := strings.TrimFunc(f, notAlnum)
		if r, _ := utf8.DecodeRuneInString(w); !sentenceStart && unicode.IsUpper(r) {
			best = w
		}
		sentenceStart = strings.HasSuffix(f, ".") || strings.HasSuffix(f, "?") || strings.HasSuffix(f, "!")
	}
	if cw := contentWords(s); best == "" && len(cw) > 0 {
		return cw[len(cw)-1]
	}
	return best
}

// formatValue returns a fixed, valid value of a string format; variants
// give different values. ok is false for formats it does not know.
func formatValue(format, seed string, variant int) (string, bool) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	n := strconv.Itoa(variant + 1)
	// numbered is first for variant 0, else other.
	numbered := func(first, other string) (string, bool) {
		if variant == 0 {
			return first, true
		}
		return other, true
	}
	switch format {
	case "date-time":
		return base.AddDate(0, 0, variant).Format(time.RFC3339), true
	case "date":
		return base.AddDate(0, 0, variant).Format(time.DateOnly), true
	case "time":
		return base.Add(12*time.Hour + time.Duration(variant)*time.Minute).Format("15:04:05Z07:00"), true
	case "duration":
		return "P" + n + "D", true
	case "email", "idn-email":
		return numbered("user@example.com", "user"+n+"@example.com")
	case "uuid":
		return uuidOf(seed, variant), true
	case "uri", "iri":
		return numbered("https://example.com/", "https://example.com/item/"+n)
	case "uri-reference", "iri-reference":
		return "/example/" + n, true
	case "uri-template":
		return "https://example.com/{id}/" + n, true
	case "hostname", "idn-hostname":
		return numbered("example.com", "host"+n+".example.com")
	case "ipv4":
		return "192.0.2." + strconv.Itoa(1+variant%254), true
	case "ipv6":
		return "2001:db8::" + strconv.FormatInt(int64(variant+1), 16), true
	case "json-pointer":
		return "/example/" + strconv.Itoa(variant), true
	case "relative-json-pointer":
		return strconv.Itoa(variant), true
	case "regex":
		return "^example" + n + "$", true
	}
	return "", false
}

// uuidOf returns a deterministic UUID in the version 4 layout.
func uuidOf(seed string, variant int) string {
	h := fnv.New128a()
	h.Write(binary.BigEndian.AppendUint64([]byte(seed), uint64(variant)))
	b := h.Sum(nil)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[:4], b[4:6], b[6:8], b[8:10], b[10:])
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
