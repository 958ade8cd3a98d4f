package anthropic

import (
	"strconv"
	"strings"
)

// SupportsNativeStructuredOutput is the default rule of
// Options.NativeStructuredOutput. It reads the family and version of a
// Claude model name, "claude-<family>-<major>[-<minor>][-<date>]", found
// anywhere in model (so "anthropic.claude-sonnet-4-5-20250929-v1:0" and
// "claude-sonnet-4-5@20250929" work too), and reports true for version 4.5
// and later of any family, and for Opus 4.1: claude-sonnet-4-5,
// claude-opus-4-1, claude-opus-4-5, claude-haiku-4-5, claude-opus-4-6,
// claude-sonnet-5, … Older names (claude-3-5-haiku-20241022,
// claude-sonnet-4-20250514, claude-opus-4-0) and names it cannot read
// report false, which selects the tool-as-schema trick that works
// everywhere.
func SupportsNativeStructuredOutput(model string) bool {
	m := strings.ToLower(model)
	i := strings.Index(m, "claude-")
	if i < 0 {
		return false
	}
	parts := strings.FieldsFunc(m[i+len("claude-"):], func(r rune) bool {
		return r == '-' || r == '@' || r == '.' || r == ':' || r == '_'
	})
	if len(parts) < 2 {
		return false
	}
	if _, legacy := version(parts[0]); legacy {
		// claude-3-5-haiku-…, claude-2.1: the version comes first.
		return false
	}
	family := parts[0]
	major, ok := version(parts[1])
	if !ok {
		return false
	}
	minor := 0
	if len(parts) > 2 {
		if v, ok := version(parts[2]); ok {
			minor = v
		}
	}
	switch {
	case major != 4:
		return major > 4
	case minor >= 5:
		return true
	default:
		return family == "opus" && minor == 1
	}
}

// version parses a version number of one or two digits; dates and other
// longer numbers are not versions.
func version(s string) (int, bool) {
	if len(s) == 0 || len(s) > 2 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
