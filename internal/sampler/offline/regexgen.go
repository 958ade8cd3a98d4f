package offline

import (
	"regexp/syntax"
	"strings"
	"unicode"
)

// maxPatternString bounds the strings built from a regular expression.
const maxPatternString = 4096

// patternString builds a string matching re. rep is how often unbounded
// quantifiers repeat (clamped to their bounds) and choice selects among
// alternatives and characters of classes, so that different (rep, choice)
// pairs give different strings. ok is false when re cannot match or the
// string grows too long.
func patternString(re *syntax.Regexp, rep, choice int) (string, bool) {
	var b strings.Builder
	ok := buildPattern(&b, re, rep, choice)
	return b.String(), ok && b.Len() <= maxPatternString
}

func buildPattern(b *strings.Builder, re *syntax.Regexp, rep, choice int) bool {
	if b.Len() > maxPatternString {
		return false
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
		return true
	case syntax.OpCharClass:
		r, ok := classRune(re.Rune, choice)
		if ok {
			b.WriteRune(r)
		}
		return ok
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte(byte('a' + choice%26))
		return true
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, -1
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
		}
		n := max(lo, rep)
		if hi >= 0 {
			n = min(n, hi)
		}
		for range n {
			if !buildPattern(b, re.Sub[0], rep, choice) {
				return false
			}
		}
		return true
	case syntax.OpCapture, syntax.OpConcat:
		for _, sub := range re.Sub {
			if !buildPattern(b, sub, rep, choice) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		if len(re.Sub) == 0 {
			return false
		}
		return buildPattern(b, re.Sub[choice%len(re.Sub)], rep, choice)
	}
	return false
}

// classRune picks the choice-th pleasant rune of a character class (ranges
// as pairs): letters first, then digits, then other printable ASCII, else
// the first printable rune of the class.
func classRune(ranges []rune, choice int) (rune, bool) {
	if len(ranges) < 2 {
		return 0, false
	}
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if r >= ranges[i] && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	var picks []rune
	for _, r := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" {
		if in(r) {
			picks = append(picks, r)
		}
	}
	if len(picks) > 0 {
		return picks[choice%len(picks)], true
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r-ranges[i] < 1024; r++ {
			if unicode.IsPrint(r) {
				return r, true
			}
		}
	}
	return ranges[0], true
}
