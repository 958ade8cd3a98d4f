package sampler

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// replyShape is a reply of the kind the adapters decode: nested objects,
// arrays, strings, numbers, raw members and a method of its own.
type replyShape struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   upperText         `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens int      `json:"prompt_tokens"`
		Cost         *float64 `json:"cost"`
	} `json:"usage"`
	Done  bool            `json:"done"`
	Error json.RawMessage `json:"error"`
}

// upperText decodes a JSON string upper-cased, to show that a type's own
// UnmarshalJSON is used.
type upperText string

func (u *upperText) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*u = upperText(strings.ToUpper(s))
	return nil
}

var replySeeds = []string{
	`{"model":"m","choices":[{"message":{"content":"hi","tool_calls":[{"id":"1"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"cost":0.5},"done":true}`,
	// Names in another case, duplicate names (the last wins), invalid
	// UTF-8 (replaced), null members, unknown members.
	"{\"MODEL\":\"a\",\"model\":\"b\",\"Choices\":[{\"message\":{\"content\":\"x\xffy\"}}],\"usage\":null,\"extra\":{\"a\":[1,2]}}",
	`{"error":{"message":"bad"},"choices":null}`,
	`{"choices":[{"message":{"content":42}}]}`,
	`{"usage":{"prompt_tokens":"3"}}`,
	`{"usage":{"prompt_tokens":1.5}}`,
	`{"model":"m"`,
	`[]`,
	``,
}

// TestDecodeReplyAsUnmarshal decodes the seeds with DecodeReply and with
// json.Unmarshal: the same value, and an error for the same inputs.
func TestDecodeReplyAsUnmarshal(t *testing.T) {
	for _, in := range replySeeds {
		sameAsUnmarshal(t, []byte(in))
	}
	var r replyShape
	if err := DecodeReply([]byte(replySeeds[1]), &r); err != nil || r.Model != "b" || r.Choices[0].Message.Content != "X\uFFFDY" {
		t.Errorf("DecodeReply = %+v, %v", r, err)
	}
}

// TestDecodeReplyErrors checks that errors name the byte or the member,
// never a Go type.
func TestDecodeReplyErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"m"`:                                "not valid JSON at byte 12: unexpected EOF",
		`{"usage":{"prompt_tokens":"3"}}`:             "/usage/prompt_tokens: unexpected JSON string",
		`{"choices":[{"message":{"content":42}}]}`:    "/choices/0/message/content: json: cannot unmarshal number into Go value of type string",
		`{"choices":[{"message":{"content":"a"}},1]}`: "/choices/1: unexpected JSON number",
	} {
		var r replyShape
		err := DecodeReply([]byte(in), &r)
		if err == nil || err.Error() != want {
			t.Errorf("DecodeReply(%s) = %v, want %q", in, err, want)
		}
	}
}

func FuzzDecodeReply(f *testing.F) {
	for _, in := range replySeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(sameAsUnmarshal)
}

func sameAsUnmarshal(t *testing.T, in []byte) {
	var v1, v2 replyShape
	err1 := json.Unmarshal(in, &v1)
	err2 := DecodeReply(in, &v2)
	if (err1 == nil) != (err2 == nil) {
		t.Fatalf("%q: json.Unmarshal: %v; DecodeReply: %v", in, err1, err2)
	}
	if err1 == nil && !reflect.DeepEqual(v1, v2) {
		t.Fatalf("%q: json.Unmarshal gives %+v; DecodeReply %+v", in, v1, v2)
	}
}
