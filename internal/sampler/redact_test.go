package sampler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestRedactor: the key is gone from texts and errors; an error without the
// key keeps its chain, one with it does not carry the key anywhere.
func TestRedactor(t *testing.T) {
	const key = "sk-secret-123"
	r := NewRedactor(key)
	if got := r.String("bad key " + key + "!"); got != "bad key [redacted]!" {
		t.Errorf("String = %q", got)
	}
	if got := NewRedactor("").String("x " + key); got != "x "+key {
		t.Errorf("zero key changed the text: %q", got)
	}
	plain := fmt.Errorf("call: %w", context.DeadlineExceeded)
	if got := r.Error(plain); got != plain || !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("an error without the key was changed: %v", got)
	}
	leaky := fmt.Errorf("auth %s: %w", key, fmt.Errorf("inner %s", key))
	got := r.Error(leaky)
	for e := got; e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), key) {
			t.Fatalf("key still in %q", e.Error())
		}
	}
	if got.Error() != "auth [redacted]: inner [redacted]" {
		t.Errorf("Error() = %q", got.Error())
	}
	if r.Error(nil) != nil {
		t.Error("nil error became non-nil")
	}
	holder := struct{ redact Redactor }{r}
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		if s := fmt.Sprintf(verb, holder); strings.Contains(s, key) {
			t.Errorf("%s of a struct holding the Redactor prints the key: %s", verb, s)
		}
	}
}
