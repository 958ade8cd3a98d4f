package sampler

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestJSONDepth(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{`1`, 0},
		{`"{["`, 0},
		{`{}`, 1},
		{`{"a":[1,{"b":"]}\"{"}]}`, 3},
		{`[[[]],[]]`, 3},
	}
	for _, tt := range tests {
		if got := JSONDepth([]byte(tt.in)); got != tt.want {
			t.Errorf("JSONDepth(%s) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestSchemaLimits: a schema too deep or too large is refused before it is
// compiled, with a 400-style error naming the limit; one within the limits
// compiles. The deep case took seconds and gigabytes before the limit.
func TestSchemaLimits(t *testing.T) {
	nested := func(levels int) string {
		return strings.Repeat(`{"type":"object","properties":{"a":`, levels) + `{"type":"string"}` + strings.Repeat(`}}`, levels)
	}
	tests := []struct {
		name, schema, wantErr string
	}{
		{"within depth", nested(MaxSchemaDepth/2 - 1), ""},
		{"too deep", nested(4000), "levels deep; the limit is 64"},
		{"too large", `{"type":"string","description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`, "bytes; the limit is 262144"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSchemaCache(0).Compile(json.RawMessage(tt.schema), "/schema")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			var inv *InvalidError
			if !errors.As(err, &inv) || inv.Errors[0].Path != "/schema" || !strings.Contains(inv.Errors[0].Message, tt.wantErr) {
				t.Fatalf("err = %v, want an error at /schema saying %q", err, tt.wantErr)
			}
		})
	}
}

// TestUnknownFormatIsAnAnnotation: a format the validator does not know
// constrains nothing (JSON Schema 2020-12), while a known one is asserted.
func TestUnknownFormatIsAnAnnotation(t *testing.T) {
	s, err := NewSchemaCache(0).Compile(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","format":"x-made-up"},"b":{"type":"string","format":"email"}}}`), "/schema")
	if err != nil {
		t.Fatal(err)
	}
	if errs := s.Validate(json.RawMessage(`{"a":"anything","b":"a@example.com"}`)); errs != nil {
		t.Errorf("unknown format refused a value: %v", errs)
	}
	if errs := s.Validate(json.RawMessage(`{"b":"not an email"}`)); len(errs) == 0 {
		t.Error("a known format was not asserted")
	}
}
