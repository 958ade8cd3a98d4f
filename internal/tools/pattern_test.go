package tools

import "testing"

func TestPattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern Pattern
		valid   bool
		name    string
		match   bool
	}{
		{"std__*", true, "std__calculate", true},
		{"std__*", true, "git__status", false},
		{"x?[a-c]", true, "xyb", true},
		{"std__[", false, "std__[", false},
		{"", false, "std__now", false},
	}
	for _, tt := range tests {
		if got := tt.pattern.Valid(); got != tt.valid {
			t.Errorf("Pattern(%q).Valid() = %v, want %v", tt.pattern, got, tt.valid)
		}
		if got := tt.pattern.Match(tt.name); got != tt.match {
			t.Errorf("Pattern(%q).Match(%q) = %v, want %v", tt.pattern, tt.name, got, tt.match)
		}
	}
	ps := Patterns{"git__*", "std__now"}
	for name, want := range map[string]bool{"git__log": true, "std__now": true, "std__calculate": false} {
		if got := ps.Match(name); got != want {
			t.Errorf("Patterns.Match(%q) = %v, want %v", name, got, want)
		}
	}
	if (Patterns{}).Match("x") {
		t.Error("no patterns match x")
	}
}
