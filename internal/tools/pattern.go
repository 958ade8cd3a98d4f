package tools

import "path"

// Pattern is a glob pattern over exposed tool names, in the syntax of
// path.Match ("*", "?", "[…]"), such as "std__*". It is the one rule for
// tool-name patterns: loops' allowedTools, a server's sampling.loop.tools
// and a client-run loop's allowedToolPatterns.
type Pattern string

// Valid reports whether p is a well-formed, non-empty pattern.
func (p Pattern) Valid() bool {
	_, err := path.Match(string(p), "")
	return err == nil && p != ""
}

// Match reports whether name matches p; a malformed pattern matches
// nothing.
func (p Pattern) Match(name string) bool {
	ok, _ := path.Match(string(p), name)
	return ok
}

// Patterns are tool-name patterns; a name matches them when it matches one.
type Patterns []Pattern

// Match reports whether name matches one of ps; none matches nothing.
func (ps Patterns) Match(name string) bool {
	for _, p := range ps {
		if p.Match(name) {
			return true
		}
	}
	return false
}
