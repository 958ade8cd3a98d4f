package openai

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/sampled/sampled/internal/sampler"
)

// appendJSON appends the request's JSON to buf, byte for byte as
// json.Marshal writes it from the tags of chatRequest and its members,
// without reflection: every call of the adapter sends one. A value of a
// type the adapter never puts in Content or ToolChoice goes through
// json.Marshal.
func (r *chatRequest) appendJSON(buf []byte) ([]byte, error) {
	var err error
	buf = sampler.AppendJSONString(append(buf, `{"model":`...), r.Model)
	buf = append(buf, `,"messages":`...)
	if r.Messages == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '[')
		for i := range r.Messages {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, err = r.Messages[i].appendJSON(buf); err != nil {
				return nil, err
			}
		}
		buf = append(buf, ']')
	}
	if r.MaxCompletionTokens != 0 {
		buf = strconv.AppendInt(append(buf, `,"max_completion_tokens":`...), int64(r.MaxCompletionTokens), 10)
	}
	if r.Temperature != nil {
		if buf, err = appendFloat(append(buf, `,"temperature":`...), *r.Temperature); err != nil {
			return nil, err
		}
	}
	if len(r.Stop) > 0 {
		buf = append(buf, `,"stop":[`...)
		for i, s := range r.Stop {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = sampler.AppendJSONString(buf, s)
		}
		buf = append(buf, ']')
	}
	if len(r.Tools) > 0 {
		buf = append(buf, `,"tools":[`...)
		for i, t := range r.Tools {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = sampler.AppendJSONString(append(buf, `{"type":`...), t.Type)
			buf = sampler.AppendJSONString(append(buf, `,"function":{"name":`...), t.Function.Name)
			if t.Function.Description != "" {
				buf = sampler.AppendJSONString(append(buf, `,"description":`...), t.Function.Description)
			}
			if len(t.Function.Parameters) > 0 {
				if buf, err = appendRaw(append(buf, `,"parameters":`...), t.Function.Parameters); err != nil {
					return nil, err
				}
			}
			buf = append(buf, "}}"...)
		}
		buf = append(buf, ']')
	}
	if r.ToolChoice != nil {
		buf = append(buf, `,"tool_choice":`...)
		switch tc := r.ToolChoice.(type) {
		case string:
			buf = sampler.AppendJSONString(buf, tc)
		case namedToolChoice:
			buf = sampler.AppendJSONString(append(buf, `{"type":`...), tc.Type)
			buf = sampler.AppendJSONString(append(buf, `,"function":{"name":`...), tc.Function.Name)
			buf = append(buf, "}}"...)
		default:
			if buf, err = appendMarshal(buf, tc); err != nil {
				return nil, err
			}
		}
	}
	if r.ParallelToolCalls != nil {
		buf = strconv.AppendBool(append(buf, `,"parallel_tool_calls":`...), *r.ParallelToolCalls)
	}
	if f := r.ResponseFormat; f != nil {
		buf = sampler.AppendJSONString(append(buf, `,"response_format":{"type":`...), f.Type)
		buf = sampler.AppendJSONString(append(buf, `,"json_schema":{"name":`...), f.JSONSchema.Name)
		buf = append(buf, `,"schema":`...)
		if f.JSONSchema.Schema == nil {
			buf = append(buf, "null"...)
		} else if buf, err = appendRaw(buf, f.JSONSchema.Schema); err != nil {
			return nil, err
		}
		buf = strconv.AppendBool(append(buf, `,"strict":`...), f.JSONSchema.Strict)
		buf = append(buf, "}}"...)
	}
	return append(buf, '}'), nil
}

// appendJSON appends the message's JSON as json.Marshal writes it.
func (m *chatMessage) appendJSON(buf []byte) ([]byte, error) {
	var err error
	buf = sampler.AppendJSONString(append(buf, `{"role":`...), m.Role)
	buf = append(buf, `,"content":`...)
	switch c := m.Content.(type) {
	case nil:
		buf = append(buf, "null"...)
	case string:
		buf = sampler.AppendJSONString(buf, c)
	case []contentPart:
		if c == nil {
			buf = append(buf, "null"...)
			break
		}
		buf = append(buf, '[')
		for i, p := range c {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = p.appendJSON(buf)
		}
		buf = append(buf, ']')
	default:
		if buf, err = appendMarshal(buf, c); err != nil {
			return nil, err
		}
	}
	if len(m.ToolCalls) > 0 {
		buf = append(buf, `,"tool_calls":[`...)
		for i, tc := range m.ToolCalls {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = sampler.AppendJSONString(append(buf, `{"id":`...), tc.ID)
			buf = sampler.AppendJSONString(append(buf, `,"type":`...), tc.Type)
			buf = sampler.AppendJSONString(append(buf, `,"function":{"name":`...), tc.Function.Name)
			buf = sampler.AppendJSONString(append(buf, `,"arguments":`...), tc.Function.Arguments)
			buf = append(buf, "}}"...)
		}
		buf = append(buf, ']')
	}
	if m.ToolCallID != "" {
		buf = sampler.AppendJSONString(append(buf, `,"tool_call_id":`...), m.ToolCallID)
	}
	return append(buf, '}'), nil
}

// appendJSON appends the part's JSON as json.Marshal writes it.
func (p *contentPart) appendJSON(buf []byte) []byte {
	buf = sampler.AppendJSONString(append(buf, `{"type":`...), p.Type)
	if p.Text != nil {
		buf = sampler.AppendJSONString(append(buf, `,"text":`...), *p.Text)
	}
	if p.ImageURL != nil {
		buf = sampler.AppendJSONString(append(buf, `,"image_url":{"url":`...), p.ImageURL.URL)
		buf = append(buf, '}')
	}
	if a := p.InputAudio; a != nil {
		buf = sampler.AppendJSONString(append(buf, `,"input_audio":{"data":`...), a.Data)
		buf = sampler.AppendJSONString(append(buf, `,"format":`...), a.Format)
		buf = append(buf, '}')
	}
	return append(buf, '}')
}

// appendRaw appends a JSON value the request carries as it is (a schema),
// as json.Marshal writes a json.RawMessage, and fails as it does when the
// value is not JSON.
func appendRaw(buf []byte, raw json.RawMessage) ([]byte, error) {
	if !json.Valid(raw) {
		return appendMarshal(buf, raw) // json.Marshal's error
	}
	return sampler.AppendJSONRaw(buf, raw), nil
}

// appendFloat appends f as json.Marshal writes a float64: the shortest
// decimal form, with an exponent below 1e-6 and from 1e21.
func appendFloat(buf []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return appendMarshal(buf, f) // json.Marshal's error
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 is written 1e-7.
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, nil
}

// appendMarshal appends v's json.Marshal encoding.
func appendMarshal(buf []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, b...), nil
}
