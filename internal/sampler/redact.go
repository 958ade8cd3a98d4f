package sampler

import (
	"errors"
	"strings"
)

// Redacted is what a Redactor puts in place of the key.
const Redacted = "[redacted]"

// Redactor removes an API key from what a provider adapter passes on: an
// upstream may echo the key in an error message. The zero value removes
// nothing. The key is held behind a pointer, so that printing a Redactor,
// or a struct holding one, with fmt does not print the key.
type Redactor struct{ r *strings.Replacer }

// NewRedactor returns a Redactor of key; "" removes nothing.
func NewRedactor(key string) Redactor {
	if key == "" {
		return Redactor{}
	}
	return Redactor{r: strings.NewReplacer(key, Redacted)}
}

// String returns s with the key replaced by Redacted.
func (r Redactor) String(s string) string {
	if r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Error returns err itself when its text does not hold the key, chain and
// all. Otherwise it returns a plain error with the redacted text: the
// chain is dropped, since an error inside it could still print the key.
func (r Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if red := r.String(text); red != text {
		return errors.New(red)
	}
	return err
}
