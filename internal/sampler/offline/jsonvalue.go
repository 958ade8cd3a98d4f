package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON values in this package are nil, bool, string, json.Number, []any and
// *object. Objects keep their members in document order so that generated
// values follow the order in which a schema declares its properties.

// object is a JSON object that keeps its members in insertion order.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

// get returns the member k.
func (o *object) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

// set adds or replaces the member k; a replaced member keeps its position.
func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// parseJSON decodes one JSON document into the package's value types.
func parseJSON(b []byte) (any, error) {
	if !json.Valid(b) {
		return nil, errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	switch d {
	case '{':
		o := newObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key is %T, not a string", kt)
			}
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return o, nil
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected delimiter %v", d)
}

// encodeJSON returns the compact JSON text of v.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	writeJSON(&buf, v)
	return buf.Bytes()
}

func writeJSON(buf *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case json.Number:
		buf.WriteString(string(t))
	case string:
		writeString(buf, t)
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSON(buf, e)
		}
		buf.WriteByte(']')
	case *object:
		buf.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			writeJSON(buf, t.vals[k])
		}
		buf.WriteByte('}')
	default:
		// Not reachable with the package's value types; keep the output valid.
		buf.WriteString("null")
	}
}

// writeString writes s as a JSON string without HTML escaping.
func writeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf.WriteString(`\ufffd`)
		case r == '"':
			buf.WriteString(`\"`)
		case r == '\\':
			buf.WriteString(`\\`)
		case r == '\n':
			buf.WriteString(`\n`)
		case r == '\r':
			buf.WriteString(`\r`)
		case r == '\t':
			buf.WriteString(`\t`)
		case r < 0x20:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[r>>4])
			buf.WriteByte(hex[r&0xf])
		case r == '\u2028':
			buf.WriteString(`\u2028`)
		case r == '\u2029':
			buf.WriteString(`\u2029`)
		default:
			buf.WriteString(s[i : i+size])
		}
		i += size
	}
	buf.WriteByte('"')
}

// jsonEqual reports whether two values are equal as JSON: numbers compare by
// value and object members regardless of order.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := ratOf(x)
		ry, oky := ratOf(y)
		return okx && oky && rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case *object:
		y, ok := b.(*object)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for _, k := range x.keys {
			yv, ok := y.vals[k]
			if !ok || !jsonEqual(x.vals[k], yv) {
				return false
			}
		}
		return true
	}
	return false
}

// ratOf converts a JSON number to an exact rational. Numbers with huge
// exponents go through float64 so that a hostile schema cannot make the
// conversion allocate without bound.
func ratOf(n json.Number) (*big.Rat, bool) {
	s := string(n)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > 400 || exp < -400 {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, false
			}
			switch {
			case math.IsInf(f, 1):
				f = math.MaxFloat64
			case math.IsInf(f, -1):
				f = -math.MaxFloat64
			}
			return new(big.Rat).SetFloat64(f), true
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// formatRat writes r as a JSON number: an integer when it is one, else the
// exact decimal expansion (every rational built from JSON decimals has one).
func formatRat(r *big.Rat) json.Number {
	if r.IsInt() {
		return json.Number(r.Num().String())
	}
	d := new(big.Int).Set(r.Denom())
	var twos, fives int
	two, five, zero := big.NewInt(2), big.NewInt(5), big.NewInt(0)
	m := new(big.Int)
	for twos < 2000 {
		if m.Mod(d, two).Cmp(zero) != 0 {
			break
		}
		d.Quo(d, two)
		twos++
	}
	for fives < 2000 {
		if m.Mod(d, five).Cmp(zero) != 0 {
			break
		}
		d.Quo(d, five)
		fives++
	}
	prec := max(twos, fives)
	if d.Cmp(big.NewInt(1)) != 0 || prec > 400 {
		f, _ := r.Float64()
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	s := r.FloatString(prec)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return json.Number(s)
}
