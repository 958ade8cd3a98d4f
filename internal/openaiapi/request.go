// Package openaiapi is OpenAI's Chat Completions dialect of sampled, the
// conversion behind the /openai/v1 routes: a request body read into the
// domain's sampler.Params, a sampler.Result or its deltas written as a
// chat completion or its chunks, and sampled's errors in OpenAI's error
// shape. It holds no HTTP: the handlers serve what it converts.
//
// The dialect keeps sampled's rules. A member sampled does not model, or
// a value it cannot honour, is refused with an error naming it, never
// dropped: an answer that quietly ignores part of its request is not
// what the caller asked for.
package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonpointer"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

// Request is the body of POST /openai/v1/chat/completions: OpenAI's
// request and sampled's own member.
type Request struct {
	chat.Request
	// Sampled holds sampled's options, which the OpenAI SDKs let callers
	// add to a request (extra_body in Python, an extra member in
	// JavaScript, option.WithJSONSet in Go). Nil means the defaults.
	Sampled *Extension `json:"sampled,omitempty"`
}

// Extension is the "sampled" member of a request.
type Extension struct {
	// Retries bounds the corrective retries of the guarantee (a
	// response_format with a schema, or tools); nil means the service's
	// default.
	Retries *int `json:"retries,omitempty"`
	// RawStream streams every attempt of a guaranteed request live, as it
	// is made, instead of only the attempt that validated: the stream then
	// holds every attempt's tokens, one after the other, each attempt
	// after the first announced by the SSE comment ": attempt N".
	RawStream bool `json:"rawStream,omitempty"`
}

// notSupported lists the members of OpenAI's request that sampled does
// not model, so that their refusal says so rather than calling them
// unknown.
var notSupported = []string{
	"audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs", "modalities",
	"moderation", "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_options",
	"prompt_cache_retention", "reasoning_effort", "safety_identifier", "service_tier", "store",
	"top_logprobs", "verbosity", "web_search_options",
}

// Decode reads a request body, one JSON value. Every member must be one
// sampled models, with the JSON type it takes: an error is a
// *sampler.InvalidError naming each offending member by its JSON Pointer
// (/messages/1/content/0/image_url/detail).
func Decode(body []byte) (*Request, error) {
	if errs := shape(body, reflect.TypeFor[Request](), ""); len(errs) > 0 {
		return nil, sampler.InvalidAll(errs)
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		// shape saw every member; what is left is a number out of range.
		return nil, sampler.Invalid("/", "%s", err.Error())
	}
	return &r, nil
}

// Types whose values take more than one JSON shape, and decode themselves.
var (
	contentType    = reflect.TypeFor[chat.Content]()
	toolChoiceType = reflect.TypeFor[chat.ToolChoice]()
	stopType       = reflect.TypeFor[chat.Stop]()
	rawType        = reflect.TypeFor[json.RawMessage]()
)

// shape checks that raw, the value at path, has the JSON shape of Go type
// t: each member of an object is a field of t's struct, each value of the
// JSON kind its field takes. null stands for an absent value anywhere.
// encoding/json says neither where in an array a wrong value is, nor
// anything of the members a type's own UnmarshalJSON leaves aside
// (chat.Content's parts): shape names both.
func shape(raw json.RawMessage, t reflect.Type, path string) []sampler.FieldError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	at := func(format string, args ...any) []sampler.FieldError {
		p := path
		if p == "" {
			p = "/"
		}
		return []sampler.FieldError{{Path: p, Message: fmt.Sprintf(format, args...)}}
	}
	switch t {
	case rawType:
		return nil
	case contentType:
		switch raw[0] {
		case '"':
			return nil
		case '[':
			return shape(raw, reflect.TypeFor[[]chat.Part](), path)
		}
		return at("content must be a string, an array of content parts or null")
	case toolChoiceType:
		switch raw[0] {
		case '"':
			return nil
		case '{':
			return shape(raw, reflect.TypeFor[chat.NamedToolChoice](), path)
		}
		return at(`tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":…}}`)
	case stopType:
		if raw[0] == '"' {
			return nil
		}
		return shape(raw, reflect.TypeFor[[]string](), path)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return shape(raw, t.Elem(), path)
	case reflect.Struct:
		var members map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &members) != nil {
			return at("must be an object")
		}
		fields := fieldsOf(t)
		var errs []sampler.FieldError
		for _, k := range slices.Sorted(maps.Keys(members)) {
			at := path + "/" + jsonpointer.EscapeToken(k)
			ft, ok := fields[k]
			switch {
			case !ok && path == "" && slices.Contains(notSupported, k):
				errs = append(errs, sampler.FieldError{Path: at, Message: fmt.Sprintf("%s is not supported by sampled; leave it out", k)})
			case !ok:
				errs = append(errs, sampler.FieldError{Path: at, Message: fmt.Sprintf("unknown member %q", k)})
			default:
				errs = append(errs, shape(members[k], ft, at)...)
			}
		}
		return errs
	case reflect.Slice:
		var items []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
			return at("must be an array")
		}
		var errs []sampler.FieldError
		for i, item := range items {
			errs = append(errs, shape(item, t.Elem(), fmt.Sprintf("%s/%d", path, i))...)
		}
		return errs
	case reflect.Map:
		var members map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &members) != nil {
			return at("must be an object")
		}
		var errs []sampler.FieldError
		for k, v := range members {
			errs = append(errs, shape(v, t.Elem(), path+"/"+jsonpointer.EscapeToken(k))...)
		}
		slices.SortFunc(errs, func(a, b sampler.FieldError) int { return strings.Compare(a.Path, b.Path) })
		return errs
	case reflect.String:
		if raw[0] != '"' {
			return at("must be a string")
		}
	case reflect.Bool:
		if raw[0] != 't' && raw[0] != 'f' {
			return at("must be a boolean")
		}
	case reflect.Int, reflect.Int64:
		var n json.Number
		if raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
			return at("must be an integer")
		}
		if _, err := n.Int64(); err != nil {
			return at("must be an integer")
		}
	case reflect.Float64:
		var f float64
		if raw[0] == '"' || json.Unmarshal(raw, &f) != nil {
			return at("must be a number")
		}
	}
	return nil
}

// fieldCache holds fieldsOf's answers: reflect.Type to
// map[string]reflect.Type, one entry for each struct type of Request.
var fieldCache sync.Map

// fieldsOf returns the fields of struct type t by their JSON names,
// gathered by structFields once for each type rather than for each value
// of it in every request.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	f := map[string]reflect.Type{}
	structFields(t, f)
	fieldCache.Store(t, f)
	return f
}

// structFields adds the fields of struct type t to fields by their JSON
// names, those of embedded structs without a name of their own included.
func structFields(t reflect.Type, fields map[string]reflect.Type) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			structFields(f.Type, fields)
		case name == "":
			fields[f.Name] = f.Type
		default:
			fields[name] = f.Type
		}
	}
}
