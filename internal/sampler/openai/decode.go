package openai

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sampled/sampled/internal/sampler"
)

// decodeReply decodes the chat completion in buf into cr as
// sampler.DecodeReply does. A reply as OpenAI documents it (each member
// of chatResponse named as its tag spells it, at most once, with a value of
// its kind or null, in valid UTF-8, and no error member) is read token by
// token, without reflection: every call of the adapter reads one. Any
// other reply is left to sampler.DecodeReply, which gives every reply
// encoding/json's meaning or its error.
func decodeReply(buf *bytes.Buffer, cr *chatResponse) error {
	data := buf.Bytes()
	if sampler.ReadAll(buf, func(d *jsontext.Decoder) bool { return readCompletion(d, cr) }) {
		return nil
	}
	*cr = chatResponse{}
	return sampler.DecodeReply(data, cr)
}

// The names of the members each object of a reply has in chatResponse,
// in the order the switches below number them.
var (
	replyNames    = []string{"model", "choices", "usage", "error"}
	usageNames    = []string{"prompt_tokens", "completion_tokens"}
	choiceNames   = []string{"message", "finish_reason"}
	messageNames  = []string{"content", "refusal", "tool_calls"}
	toolCallNames = []string{"id", "type", "function"}
	functionNames = []string{"name", "arguments"}
)

// readCompletion reads a chat completion as decodeReply describes, and
// reports whether it could.
func readCompletion(d *jsontext.Decoder, cr *chatResponse) bool {
	return sampler.ReadObject(d, replyNames, false, func(i int) bool {
		switch i {
		case 0:
			return sampler.ReadString(d, &cr.Model)
		case 1:
			return sampler.ReadArray(d, &cr.Choices, func(c *chatChoice) bool { return readChoice(d, c) })
		case 2:
			u := &cr.Usage
			return sampler.ReadNull(d) || sampler.ReadObject(d, usageNames, false, func(i int) bool {
				if i == 0 {
					return sampler.ReadInt(d, &u.PromptTokens)
				}
				return sampler.ReadInt(d, &u.CompletionTokens)
			})
		}
		return false // an error member: sampler.DecodeReply keeps it as it came
	})
}

func readChoice(d *jsontext.Decoder, c *chatChoice) bool {
	return sampler.ReadObject(d, choiceNames, false, func(i int) bool {
		if i == 1 {
			return sampler.ReadString(d, &c.FinishReason)
		}
		m := &c.Message
		return sampler.ReadNull(d) || sampler.ReadObject(d, messageNames, false, func(i int) bool {
			switch i {
			case 0:
				// A string; an array of parts is replyText's to read.
				var s string
				ok := sampler.ReadString(d, &s)
				m.Content = replyText(s)
				return ok
			case 1:
				return sampler.ReadString(d, &m.Refusal)
			}
			return sampler.ReadArray(d, &m.ToolCalls, func(tc *toolCall) bool { return readToolCall(d, tc) })
		})
	})
}

func readToolCall(d *jsontext.Decoder, tc *toolCall) bool {
	return sampler.ReadObject(d, toolCallNames, false, func(i int) bool {
		switch i {
		case 0:
			return sampler.ReadString(d, &tc.ID)
		case 1:
			return sampler.ReadString(d, &tc.Type)
		}
		f := &tc.Function
		return sampler.ReadNull(d) || sampler.ReadObject(d, functionNames, false, func(i int) bool {
			if i == 0 {
				return sampler.ReadString(d, &f.Name)
			}
			return sampler.ReadString(d, &f.Arguments)
		})
	})
}
