package openai

import (
	"bytes"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sampled/sampled/internal/sampler"
)

// replyDecoders holds the token decoders decodeReply reads replies with;
// noReply is what a pooled one is left reading.
var (
	replyDecoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}
	noReply       = new(bytes.Buffer)
	// readMembers finds the duplicate names it needs to know of.
	duplicatesRead = jsontext.AllowDuplicateNames(true)
)

// decodeReply decodes the chat completion in buf into cr as
// sampler.DecodeReply does. A reply as OpenAI documents it (each member
// of chatResponse named as its tag spells it, at most once, with a value of
// its kind or null, in valid UTF-8, and no error member) is read token by
// token, without reflection: every call of the adapter reads one. Any
// other reply is left to sampler.DecodeReply, which gives every reply
// encoding/json's meaning or its error.
func decodeReply(buf *bytes.Buffer, cr *chatResponse) error {
	data := buf.Bytes() // the decoder reads buf, which nothing writes to
	d := replyDecoders.Get().(*jsontext.Decoder)
	d.Reset(buf, duplicatesRead)
	ok := readCompletion(d, cr)
	d.Reset(noReply) // Reset neither reads nor writes it
	replyDecoders.Put(d)
	if ok {
		return nil
	}
	*cr = chatResponse{}
	return sampler.DecodeReply(data, cr)
}

// readCompletion reads a chat completion as decodeReply describes, and reports
// whether it could.
func readCompletion(d *jsontext.Decoder, cr *chatResponse) bool {
	ok := readMembers(d, replyNames, func(i int) bool {
		switch i {
		case 0:
			return readString(d, &cr.Model)
		case 1:
			return readArray(d, &cr.Choices, func(c *chatChoice) bool { return readChoice(d, c) })
		case 2:
			return d.PeekKind() == 'n' && d.SkipValue() == nil ||
				readMembers(d, usageNames, func(i int) bool {
					if i == 0 {
						return readInt(d, &cr.Usage.PromptTokens)
					}
					return readInt(d, &cr.Usage.CompletionTokens)
				})
		}
		return false // an error member: sampler.DecodeReply keeps it as it came
	})
	if !ok {
		return false
	}
	_, err := d.ReadToken()
	return err == io.EOF // one value, nothing after it
}

// The names of the members each object of a reply has in chatResponse,
// in the order the switches of readCompletion number them.
var (
	replyNames    = []string{"model", "choices", "usage", "error"}
	usageNames    = []string{"prompt_tokens", "completion_tokens"}
	choiceNames   = []string{"message", "finish_reason"}
	messageNames  = []string{"content", "refusal", "tool_calls"}
	toolCallNames = []string{"id", "type", "function"}
	functionNames = []string{"name", "arguments"}
)

func readChoice(d *jsontext.Decoder, c *chatChoice) bool {
	return readMembers(d, choiceNames, func(i int) bool {
		if i == 1 {
			return readString(d, &c.FinishReason)
		}
		m := &c.Message
		return d.PeekKind() == 'n' && d.SkipValue() == nil ||
			readMembers(d, messageNames, func(i int) bool {
				switch i {
				case 0:
					// A string; an array of parts is replyText's to read.
					var s string
					if !readString(d, &s) {
						return false
					}
					m.Content = replyText(s)
					return true
				case 1:
					return readString(d, &m.Refusal)
				}
				return readArray(d, &m.ToolCalls, func(tc *toolCall) bool { return readToolCall(d, tc) })
			})
	})
}

func readToolCall(d *jsontext.Decoder, tc *toolCall) bool {
	return readMembers(d, toolCallNames, func(i int) bool {
		switch i {
		case 0:
			return readString(d, &tc.ID)
		case 1:
			return readString(d, &tc.Type)
		}
		return d.PeekKind() == 'n' && d.SkipValue() == nil ||
			readMembers(d, functionNames, func(i int) bool {
				if i == 0 {
					return readString(d, &tc.Function.Name)
				}
				return readString(d, &tc.Function.Arguments)
			})
	})
}

// readMembers reads an object whose members are names, calling member with
// the index of each of them and skipping the members it does not name. It
// reports false for what only sampler.DecodeReply reads right: not an
// object, a name given twice, or a name encoding/json would take for one of
// names (spelled in other cases, escaped, not ASCII).
func readMembers(d *jsontext.Decoder, names []string, member func(i int) bool) bool {
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return false
	}
	var seen uint
	for d.PeekKind() != '}' {
		v, err := d.ReadValue()
		if err != nil {
			return false
		}
		name := v[1 : len(v)-1]
		i := nameIndex(name, names)
		switch {
		case i >= 0:
			if seen&(1<<i) != 0 {
				return false
			}
			seen |= 1 << i
			if !member(i) {
				return false
			}
		case mayMean(name, names):
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

// mayMean reports whether encoding/json could match name, a member name
// as it stands in the reply, to one of names: it matches names without
// regard to case, and the decoder's options may also ignore '_' and '-'.
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

// readString reads a string into s; null leaves s as it is.
func readString(d *jsontext.Decoder, s *string) bool {
	switch d.PeekKind() {
	case 'n':
		return d.SkipValue() == nil
	case '"':
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
	return false
}

// readInt reads an integer into n; null leaves n as it is.
func readInt(d *jsontext.Decoder, n *int) bool {
	switch d.PeekKind() {
	case 'n':
		return d.SkipValue() == nil
	case '0':
		v, err := d.ReadValue()
		if err != nil {
			return false
		}
		i, err := strconv.ParseInt(string(v), 10, strconv.IntSize)
		*n = int(i)
		return err == nil
	}
	return false
}

// readArray reads an array of objects into s, each with read; null leaves
// s nil.
func readArray[T any](d *jsontext.Decoder, s *[]T, read func(*T) bool) bool {
	if d.PeekKind() == 'n' {
		return d.SkipValue() == nil
	}
	if t, err := d.ReadToken(); err != nil || t.Kind() != '[' {
		return false
	}
	*s = []T{}
	for d.PeekKind() == '{' {
		var zero T
		*s = append(*s, zero)
		if !read(&(*s)[len(*s)-1]) {
			return false
		}
	}
	t, err := d.ReadToken()
	return err == nil && t.Kind() == ']' // anything but objects: sampler.DecodeReply
}
