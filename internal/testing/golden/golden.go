// Package golden compares JSON documents produced by tests with golden
// files under testdata, in one canonical form: sorted keys, two-space
// indent, numbers as written. Tests pass update (their -update flag) to
// rewrite the files.
package golden

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Canonical re-encodes a JSON document with sorted keys, two-space indent
// and numbers kept as written.
func Canonical(t testing.TB, doc []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// JSON compares doc, in canonical form, with the file at path; with update
// set it rewrites the file instead.
func JSON(t testing.TB, path string, doc []byte, update bool) {
	t.Helper()
	got := Canonical(t, doc)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
