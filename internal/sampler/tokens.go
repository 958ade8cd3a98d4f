package sampler

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The Read functions below read JSON of a known shape token by token,
// without reflection, for the two decodings every sampling request makes:
// its body and its provider's reply. Each reports false for anything it
// does not read exactly as the reflecting decoder with V1Options would:
// the caller then decodes the whole text that way, which gives every
// input its meaning or its error.

// decoders holds the token decoders of ReadAll; noInput is what a pooled
// one is left reading. Names may repeat for the decoders: ReadObject finds
// the repeated names that matter.
var (
	decoders      = sync.Pool{New: func() any { return new(jsontext.Decoder) }}
	noInput       = new(bytes.Buffer)
	repeatedNames = jsontext.AllowDuplicateNames(true)
)

// ReadAll reads the JSON text in buf with read and reports whether read
// read it and nothing follows its value. It consumes buf: a slice of buf's
// bytes taken before holds them still, for the reflecting decoder.
func ReadAll(buf *bytes.Buffer, read func(d *jsontext.Decoder) bool) bool {
	d := decoders.Get().(*jsontext.Decoder)
	d.Reset(buf, repeatedNames)
	ok := read(d)
	if ok {
		_, err := d.ReadToken()
		ok = err == io.EOF
	}
	d.Reset(noInput) // Reset neither reads nor writes it
	decoders.Put(d)
	return ok
}

// ReadObject reads an object whose members are names, calling member with
// the index of each name it holds, and skipping the members it does not
// name unless strict. It reports false (and so do the calls of member)
// for what only the reflecting decoder reads right: not an object, a name
// given twice, a name that decoder may take for one of names (spelled in
// other cases or with other '_' and '-', escaped, not ASCII), or, strict,
// any other name.
func ReadObject(d *jsontext.Decoder, names []string, strict bool, member func(i int) bool) bool {
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return false
	}
	var seen uint64
	for d.PeekKind() != '}' {
		v, err := d.ReadValue()
		if err != nil {
			return false
		}
		name := v[1 : len(v)-1]
		i := nameIndex(name, names)
		switch {
		case i >= 0:
			if seen&(1<<i) != 0 || !member(i) {
				return false
			}
			seen |= 1 << i
		case strict || mayMean(name, names):
			return false
		default:
			if d.SkipValue() != nil {
				return false
			}
		}
	}
	_, err := d.ReadToken()
	return err == nil
}

func nameIndex(name []byte, names []string) int {
	for i, n := range names {
		if string(name) == n {
			return i
		}
	}
	return -1
}

// mayMean reports whether the reflecting decoder could match name, a
// member name as it stands in the text, to one of names.
func mayMean(name []byte, names []string) bool {
	for _, c := range name {
		if c == '\\' || c >= 0x80 {
			return true
		}
	}
	for _, n := range names {
		if foldedEqual(name, n) {
			return true
		}
	}
	return false
}

// foldedEqual compares ASCII a and b without regard to case, '_' or '-'.
func foldedEqual(a []byte, b string) bool {
	i, j := 0, 0
	for {
		for i < len(a) && (a[i] == '_' || a[i] == '-') {
			i++
		}
		for j < len(b) && (b[j] == '_' || b[j] == '-') {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		if lower(a[i]) != lower(b[j]) {
			return false
		}
		i++
		j++
	}
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// ReadNull reads a null, if that is what comes next.
func ReadNull(d *jsontext.Decoder) bool {
	return d.PeekKind() == 'n' && d.SkipValue() == nil
}

// ReadString reads a string into s; null leaves s as it is.
func ReadString(d *jsontext.Decoder, s *string) bool {
	if d.PeekKind() != '"' {
		return ReadNull(d)
	}
	v, err := d.ReadValue()
	if err != nil {
		return false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		*s = string(v[1 : len(v)-1])
		return true
	}
	u, err := jsontext.AppendUnquote(nil, v)
	*s = string(u)
	return err == nil
}

// ReadInt reads an integer into n; null leaves n as it is.
func ReadInt(d *jsontext.Decoder, n *int) bool {
	return readNumber(d, n, func(s string) (int, error) {
		i, err := strconv.ParseInt(s, 10, strconv.IntSize)
		return int(i), err
	})
}

// ReadFloat reads a number into f; null leaves f as it is.
func ReadFloat(d *jsontext.Decoder, f *float64) bool {
	return readNumber(d, f, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
}

// readNumber reads a number into p with parse; null leaves p as it is.
func readNumber[T any](d *jsontext.Decoder, p *T, parse func(string) (T, error)) bool {
	if d.PeekKind() != '0' {
		return ReadNull(d)
	}
	v, err := d.ReadValue()
	if err != nil {
		return false
	}
	*p, err = parse(string(v))
	return err == nil
}

// ReadRaw reads a value other than null into raw, as it stands in the
// text.
func ReadRaw(d *jsontext.Decoder, raw *json.RawMessage) bool {
	if k := d.PeekKind(); k == 'n' || k == 0 {
		return false // null is a json.RawMessage's own to read
	}
	v, err := d.ReadValue()
	*raw = json.RawMessage(bytes.Clone(v))
	return err == nil
}

// ReadArray reads an array into s, each element with read; null leaves s
// nil.
func ReadArray[T any](d *jsontext.Decoder, s *[]T, read func(*T) bool) bool {
	if d.PeekKind() != '[' {
		return ReadNull(d)
	}
	if _, err := d.ReadToken(); err != nil {
		return false
	}
	*s = []T{}
	for k := d.PeekKind(); k != ']'; k = d.PeekKind() {
		if k == 0 {
			return false
		}
		var zero T
		*s = append(*s, zero)
		if !read(&(*s)[len(*s)-1]) {
			return false
		}
	}
	_, err := d.ReadToken()
	return err == nil
}
