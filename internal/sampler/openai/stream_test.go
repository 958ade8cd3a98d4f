package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// recorder keeps the deltas a stream emits.
type recorder struct{ deltas []sampler.Delta }

func (r *recorder) emit(d sampler.Delta) { r.deltas = append(r.deltas, d) }

// text joins the text deltas.
func (r *recorder) text() string {
	var b strings.Builder
	for _, d := range r.deltas {
		b.WriteString(d.Text)
	}
	return b.String()
}

// args joins the argument fragments of each call, by index.
func (r *recorder) args() map[int]string {
	out := map[int]string{}
	for _, d := range r.deltas {
		if d.ToolCall != nil {
			out[d.ToolCall.Index] += d.ToolCall.Arguments
		}
	}
	return out
}

// streamEvents returns the data lines of a recorded stream.
func streamEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			out = append(out, strings.TrimSpace(data))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStreamRecordings holds every recorded stream to OpenAI's description:
// each chunk is a CreateChatCompletionStreamResponse, and an error sent in
// place of a chunk is an ErrorResponse.
func TestStreamRecordings(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "openai", "streams", "*.sse"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			events := streamEvents(t, readTestdata(t, filepath.Join("streams", filepath.Base(file))))
			chunks := 0
			for _, data := range events {
				if data == "[DONE]" {
					continue
				}
				var members map[string]json.RawMessage
				if err := json.Unmarshal([]byte(data), &members); err != nil {
					t.Fatalf("event is not a JSON object: %v\n%s", err, data)
				}
				if _, ok := members["error"]; ok {
					checkSpec(t, "ErrorResponse", []byte(data))
					continue
				}
				checkSpec(t, "CreateChatCompletionStreamResponse", []byte(data))
				chunks++
			}
			if chunks == 0 {
				t.Error("the recording holds no chunk")
			}
		})
	}
}

// TestStream replays recorded streams and checks the deltas, the Response,
// which must equal Sample's for the whole reply of the same answer, and
// the request, which must be Sample's and ask for a stream with usage.
func TestStream(t *testing.T) {
	tests := []struct {
		name          string
		stream, whole string
		req           *sampler.Request
		want          *sampler.Response
		wantArgs      map[int]string
	}{
		{
			name:   "text",
			stream: "text.sse",
			whole:  "text.json",
			req: &sampler.Request{Model: "gpt-4.1", SystemPrompt: "You are a helpful assistant.",
				Messages: []sampler.Message{userText("Hello!")}, MaxTokens: 256},
			want: &sampler.Response{
				Model:      "gpt-4.1-2025-04-14",
				Content:    []sampler.Content{sampler.TextBlock("Hello! How can I assist you today?")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 19, OutputTokens: 10},
			},
			wantArgs: map[int]string{},
		},
		{
			name:   "tool_calls",
			stream: "tool_calls.sse",
			whole:  "two_tool_calls.json",
			req: &sampler.Request{Model: "gpt-4o-2024-08-06",
				Messages:  []sampler.Message{userText("What's the weather like in San Francisco and Tokyo?")},
				MaxTokens: 1024, Tools: []sampler.Tool{weatherTool()}},
			want: &sampler.Response{
				Model: "gpt-4o-2024-08-06",
				Content: []sampler.Content{
					{Type: sampler.BlockToolUse, ID: "call_8qty38", Name: "get_current_weather",
						Input: json.RawMessage(`{"location":"San Francisco, CA","unit":"celsius"}`)},
					{Type: sampler.BlockToolUse, ID: "call_9r2k5z", Name: "get_current_weather",
						Input: json.RawMessage(`{"location":"Tokyo, Japan","unit":"celsius"}`)},
				},
				StopReason: sampler.StopToolUse,
				Usage:      sampler.Usage{InputTokens: 84, OutputTokens: 49},
			},
			wantArgs: map[int]string{
				0: `{"location": "San Francisco, CA", "unit": "celsius"}`,
				1: `{"location": "Tokyo, Japan", "unit": "celsius"}`,
			},
		},
		{
			name:   "refusal",
			stream: "refusal.sse",
			whole:  "refusal.json",
			req: &sampler.Request{Model: "gpt-4o-2024-08-06",
				Messages:  []sampler.Message{userText("How do I pick a lock?")},
				MaxTokens: 256, Schema: json.RawMessage(eventSchema)},
			want: &sampler.Response{
				Model:      "gpt-4o-2024-08-06",
				Content:    []sampler.Content{sampler.TextBlock("I'm sorry, I can't assist with that request.")},
				StopReason: sampler.StopRefusal,
				Usage:      sampler.Usage{InputTokens: 81, OutputTokens: 11},
			},
			wantArgs: map[int]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{file: "streams/" + tt.stream, stream: true}, reply{file: "replies/" + tt.whole})
			p := New(Options{BaseURL: f.srv.URL, APIKey: testKey})
			var rec recorder
			got, err := p.Stream(context.Background(), tt.req, rec.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Stream (-want +got):\n%s", diff)
			}
			whole, err := p.Sample(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if diff := cmp.Diff(whole, got); diff != "" {
				t.Errorf("Stream's Response differs from Sample's (-sample +stream):\n%s", diff)
			}

			// The deltas make the answer.
			var text strings.Builder
			var calls []sampler.Content
			for _, c := range got.Content {
				switch c.Type {
				case sampler.BlockText:
					text.WriteString(c.Text)
				case sampler.BlockToolUse:
					calls = append(calls, c)
				}
			}
			if got := rec.text(); got != text.String() {
				t.Errorf("text deltas make %q, want %q", got, text.String())
			}
			if diff := cmp.Diff(tt.wantArgs, rec.args()); diff != "" {
				t.Errorf("argument fragments (-want +got):\n%s", diff)
			}
			for _, d := range rec.deltas {
				if d.Attempt != 0 {
					t.Errorf("delta %+v has an attempt", d)
				}
				if (d.Text == "") == (d.ToolCall == nil) {
					t.Errorf("delta %+v is neither text nor a tool call", d)
				}
				if tc := d.ToolCall; tc != nil {
					if tc.Index >= len(calls) || tc.ID != calls[tc.Index].ID || tc.Name != calls[tc.Index].Name {
						t.Errorf("fragment %+v does not name its call", *tc)
					}
				}
			}
			for i, c := range calls {
				if in := toolInput(rec.args()[i]); !bytes.Equal(in, c.Input) {
					t.Errorf("call %d: fragments make %s, want %s", i, in, c.Input)
				}
			}

			reqs := f.received()
			if len(reqs) != 2 {
				t.Fatalf("upstream got %d requests, want 2", len(reqs))
			}
			if got, want := reqs[0].header.Get("Accept"), "text/event-stream"; got != want {
				t.Errorf("Accept %q, want %q", got, want)
			}
			var sent chat.Request
			if err := json.Unmarshal(reqs[0].body, &sent); err != nil {
				t.Fatal(err)
			}
			if !sent.Stream || sent.StreamOptions == nil || !sent.StreamOptions.IncludeUsage {
				t.Errorf("stream %v, stream_options %+v; want true, include_usage", sent.Stream, sent.StreamOptions)
			}
			if diff := cmp.Diff(withoutStream(t, reqs[1].body), withoutStream(t, reqs[0].body)); diff != "" {
				t.Errorf("the streamed request is not Sample's (-sample +stream):\n%s", diff)
			}
			if tt.name == "text" {
				checkGolden(t, "stream_text", reqs[0].body)
			}
		})
	}
}

// withoutStream decodes a request body and drops its stream members.
func withoutStream(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "stream")
	delete(m, "stream_options")
	return m
}

// TestStreamInterleaved checks that the recording of parallel calls does
// interleave them, so that TestStream's tool_calls case tests gathering by
// index.
func TestStreamInterleaved(t *testing.T) {
	f := newFake(t, reply{file: "streams/tool_calls.sse", stream: true})
	p := New(Options{BaseURL: f.srv.URL})
	var rec recorder
	if _, err := p.Stream(context.Background(), &sampler.Request{Model: "gpt-4o", Messages: []sampler.Message{userText("Weather?")},
		Tools: []sampler.Tool{weatherTool()}}, rec.emit); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var order []int
	for _, d := range rec.deltas {
		if d.ToolCall != nil {
			order = append(order, d.ToolCall.Index)
		}
	}
	switches := 0
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1] {
			switches++
		}
	}
	if switches < 3 {
		t.Errorf("fragments by call %v: the calls do not interleave", order)
	}
}

// sse makes an event stream of data lines.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

// chunkOf returns a chunk of a compatible server with one choice's delta
// and finish reason (null when "").
func chunkOf(delta, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + `}]}`
}

// TestStreamCompatible replays streams of compatible servers: tool calls
// without ids or all at index 0, no [DONE] or no usage, comments, other
// fields, CRLF and data split over lines, and a server that answers whole.
func TestStreamCompatible(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		header     map[string]string
		want       *sampler.Response
		wantDeltas []sampler.Delta
	}{
		{
			name: "calls without ids",
			body: sse(
				chunkOf(`{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"a","arguments":"{\"x\":"}}]}`, ""),
				chunkOf(`{"tool_calls":[{"index":1,"type":"function","function":{"name":"b","arguments":""}}]}`, ""),
				chunkOf(`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`, ""),
				chunkOf(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, "tool_calls"),
				"[DONE]"),
			want: &sampler.Response{Model: "m", StopReason: sampler.StopToolUse, Content: []sampler.Content{
				{Type: sampler.BlockToolUse, ID: "call_0", Name: "a", Input: json.RawMessage(`{"x":1}`)},
				{Type: sampler.BlockToolUse, ID: "call_1", Name: "b", Input: json.RawMessage(`{}`)},
			}},
			wantDeltas: []sampler.Delta{
				{ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "call_0", Name: "a", Arguments: `{"x":`}},
				{ToolCall: &sampler.ToolCallDelta{Index: 1, ID: "call_1", Name: "b"}},
				{ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "call_0", Name: "a", Arguments: `1}`}},
				{ToolCall: &sampler.ToolCallDelta{Index: 1, ID: "call_1", Name: "b", Arguments: `{}`}},
			},
		},
		{
			name: "whole calls all at index 0, finished with stop, no [DONE]",
			body: sse(
				chunkOf(`{"role":"assistant","content":"Checking."}`, ""),
				chunkOf(`{"tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]}`, ""),
				chunkOf(`{"tool_calls":[{"index":0,"id":"t2","type":"function","function":{"name":"b","arguments":"{\"y\":2}"}}]}`, ""),
				chunkOf(`{}`, "stop")),
			want: &sampler.Response{Model: "m", StopReason: sampler.StopToolUse, Content: []sampler.Content{
				sampler.TextBlock("Checking."),
				{Type: sampler.BlockToolUse, ID: "t1", Name: "a", Input: json.RawMessage(`{"x":1}`)},
				{Type: sampler.BlockToolUse, ID: "t2", Name: "b", Input: json.RawMessage(`{"y":2}`)},
			}},
			wantDeltas: []sampler.Delta{
				{Text: "Checking."},
				{ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "t1", Name: "a", Arguments: `{"x":1}`}},
				{ToolCall: &sampler.ToolCallDelta{Index: 1, ID: "t2", Name: "b", Arguments: `{"y":2}`}},
			},
		},
		{
			name: "comments, other fields, CRLF, data over two lines, usage on every chunk",
			body: ": keep-alive\r\n\r\n" +
				"event: message\r\nid: 1\r\nretry: 100\r\ndata:" + chunkOf(`{"role":"assistant","content":"Hi"}`, "") + "\r\n\r\n" +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",` + "\n" +
				`data: "choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\n\n" +
				"data:\n\n" +
				": done\n\ndata: [DONE]\n\n",
			want: &sampler.Response{Model: "m", StopReason: sampler.StopMaxTokens,
				Content: []sampler.Content{sampler.TextBlock("Hi there")}, Usage: sampler.Usage{InputTokens: 3, OutputTokens: 2}},
			wantDeltas: []sampler.Delta{{Text: "Hi"}, {Text: " there"}},
		},
		{
			name: "a second choice is not the answer",
			body: sse(
				chunkOf(`{"content":"A"}`, ""),
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":1,"delta":{"content":"B"},"finish_reason":"stop"}]}`,
				chunkOf(`{}`, "stop"), "[DONE]"),
			want:       &sampler.Response{Model: "m", StopReason: sampler.StopEndTurn, Content: []sampler.Content{sampler.TextBlock("A")}},
			wantDeltas: []sampler.Delta{{Text: "A"}},
		},
		{
			name:   "a server that answers whole",
			body:   string(readTestdata(t, "replies/parallel_tool_calls.json")),
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"},
			want: &sampler.Response{Model: "gpt-4o-2024-08-06", StopReason: sampler.StopToolUse, Usage: sampler.Usage{InputTokens: 115, OutputTokens: 70},
				Content: []sampler.Content{
					sampler.TextBlock("Let me check these cities."),
					{Type: sampler.BlockToolUse, ID: "call_8qty38", Name: "get_current_weather",
						Input: json.RawMessage(`{"location":"San Francisco, CA","unit":"celsius"}`)},
					{Type: sampler.BlockToolUse, ID: "call_9r2k5z", Name: "get_current_weather",
						Input: json.RawMessage(`{"location":"Tokyo, Japan","unit":"celsius"}`)},
					{Type: sampler.BlockToolUse, ID: "call_x0bad1", Name: "get_current_weather",
						Input: json.RawMessage(`{"_invalid_arguments":"{\"location\": \"Paris"}`)},
				}},
			wantDeltas: []sampler.Delta{
				{Text: "Let me check these cities."},
				{ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "call_8qty38", Name: "get_current_weather", Arguments: `{"location":"San Francisco, CA","unit":"celsius"}`}},
				{ToolCall: &sampler.ToolCallDelta{Index: 1, ID: "call_9r2k5z", Name: "get_current_weather", Arguments: `{"location":"Tokyo, Japan","unit":"celsius"}`}},
				{ToolCall: &sampler.ToolCallDelta{Index: 2, ID: "call_x0bad1", Name: "get_current_weather", Arguments: `{"_invalid_arguments":"{\"location\": \"Paris"}`}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{body: tt.body, header: tt.header, stream: true})
			p := New(Options{Name: "vllm", BaseURL: f.srv.URL})
			var rec recorder
			got, err := p.Stream(context.Background(), helloRequest(), rec.emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Stream (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDeltas, rec.deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreamErrors checks the streams that fail: cut short, an error in
// place of a chunk, a chunk that does not decode, a line past the bound,
// no choice at all. The fragments before the failure are emitted.
func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name          string
		reply         reply
		want          *sampler.UpstreamError
		wantAPI       *APIError
		wantText      string
		wantRetryable bool
	}{
		{
			name:          "truncated",
			reply:         reply{file: "streams/truncated.sse", stream: true},
			want:          &sampler.UpstreamError{Provider: "openai", Message: "the stream ended before its end"},
			wantText:      "Once upon a time",
			wantRetryable: true,
		},
		{
			name:  "error mid-stream",
			reply: reply{file: "streams/error_midstream.sse", stream: true},
			want: &sampler.UpstreamError{Provider: "openai", Status: 200,
				Message: "the stream carried an error: The server had an error while processing your request. Sorry about that!"},
			wantAPI:  &APIError{Message: "The server had an error while processing your request. Sorry about that!", Type: "server_error"},
			wantText: "Once upon a",
		},
		{
			name: "error mid-stream that echoes the key",
			reply: reply{stream: true, echo: func(r *http.Request) string {
				return sse(chunkOf(`{"content":"Hi"}`, ""),
					fmt.Sprintf(`{"error":{"message":"key %s revoked","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, r.Header.Get("Authorization")))
			}},
			want:     &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "the stream carried an error: key Bearer [redacted] revoked"},
			wantAPI:  &APIError{Message: "key Bearer [redacted] revoked", Type: "invalid_request_error", Code: "invalid_api_key"},
			wantText: "Hi",
		},
		{
			name:  "error as text",
			reply: reply{stream: true, body: sse(`{"error":"model overloaded"}`)},
			want:  &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "the stream carried an error: model overloaded"},
		},
		{
			name:     "unreadable chunk",
			reply:    reply{stream: true, body: sse(chunkOf(`{"content":"Hi"}`, ""), `{"id":"c","choices":[{"index":0,"delta":{"content":7}}]}`)},
			want:     &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "unreadable stream chunk: json: cannot unmarshal number into Go struct field ChunkDelta.Chunk.choices.delta.content of type string"},
			wantText: "Hi",
		},
		{
			name:  "a line past the bound",
			reply: reply{stream: true, body: "data: " + strings.Repeat("a", maxStreamLine) + "\n\n"},
			want:  &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "a line of the stream exceeds 4 MiB"},
		},
		{
			name:  "no choice",
			reply: reply{stream: true, body: sse(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`, "[DONE]")},
			want:  &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "the reply has no choices"},
		},
		{
			name:          "empty",
			reply:         reply{stream: true},
			want:          &sampler.UpstreamError{Provider: "openai", Message: "the stream ended before its end"},
			wantRetryable: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			p := New(Options{BaseURL: f.srv.URL, APIKey: testKey})
			var rec recorder
			resp, err := p.Stream(context.Background(), helloRequest(), rec.emit)
			if err == nil {
				t.Fatalf("Stream = %+v, want an error", resp)
			}
			got := asUpstream(t, err)
			if diff := cmp.Diff(tt.want, got, ignoreErr()); diff != "" {
				t.Errorf("UpstreamError (-want +got):\n%s", diff)
			}
			var api *APIError
			errors.As(err, &api)
			if diff := cmp.Diff(tt.wantAPI, api); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			if r := retry.Retryable(err); r != tt.wantRetryable {
				t.Errorf("retry.Retryable = %v, want %v", r, tt.wantRetryable)
			}
			if got := rec.text(); got != tt.wantText {
				t.Errorf("emitted %q, want %q", got, tt.wantText)
			}
			for e := error(got); e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), testKey) {
					t.Errorf("error text holds the API key: %s", e)
				}
			}
		})
	}
}

// TestStreamStatusErrors: a status other than 2xx fails Stream as it fails
// Sample, before any delta.
func TestStreamStatusErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
	}{
		{"rate limited", reply{status: http.StatusTooManyRequests, file: "errors/rate_limit.json", header: map[string]string{"Retry-After": "7"}}},
		{"bad request", reply{status: http.StatusBadRequest, file: "errors/bad_request.json"}},
		{"HTML from a proxy", reply{status: http.StatusBadGateway, body: "<html><body><h1>502 Bad Gateway</h1></body></html>", header: map[string]string{"Content-Type": "text/html"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply, tt.reply)
			p := New(Options{BaseURL: f.srv.URL, APIKey: testKey})
			var rec recorder
			_, serr := p.Stream(context.Background(), helloRequest(), rec.emit)
			_, werr := p.Sample(context.Background(), helloRequest())
			if diff := cmp.Diff(asUpstream(t, werr), asUpstream(t, serr)); diff != "" {
				t.Errorf("Stream's error differs from Sample's (-sample +stream):\n%s", diff)
			}
			if len(rec.deltas) != 0 {
				t.Errorf("emitted %+v before a failed status", rec.deltas)
			}
		})
	}
}

// TestStreamCancel cancels the caller's context while the upstream holds
// the stream open: Stream returns at once with the cancellation, and the
// upstream sees the client leave.
func TestStreamCancel(t *testing.T) {
	f := newFake(t, reply{file: "streams/truncated.sse", stream: true, hold: true})
	p := New(Options{BaseURL: f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan sampler.Delta, 16)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Stream(ctx, helloRequest(), func(d sampler.Delta) { first <- d })
		errc <- err
	}()
	testwait.Recv(t, f.arrived, "the stream to reach the fake")
	if d := testwait.Recv(t, first, "a first delta"); d.Text != "Once" {
		t.Errorf("first delta %+v, want the text Once", d)
	}
	start := time.Now()
	cancel()
	err := testwait.Recv(t, errc, "Stream to return")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream error = %v, want one matching context.Canceled", err)
	}
	if ue := asUpstream(t, err); ue.Timeout || ue.Status != 0 {
		t.Errorf("UpstreamError = %+v, want no status and no timeout", ue)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Stream took %v to return after the cancellation", d)
	}
	testwait.Recv(t, f.gone, "the fake to see the client leave")
}

// TestStreamService streams through the Service: its OnDelta sees the
// adapter's fragments, tagged with the attempt, and the result is the
// answer's.
func TestStreamService(t *testing.T) {
	f := newFake(t, reply{file: "streams/text.sse", stream: true})
	svc := newService(t, New(Options{BaseURL: f.srv.URL, APIKey: testKey}))
	var rec recorder
	res, err := svc.Sample(context.Background(), &sampler.Params{Request: sampler.Request{
		Messages: []sampler.Message{userText("Hello!")}, MaxTokens: 64}, OnDelta: rec.emit})
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	if got, want := res.Text, "Hello! How can I assist you today?"; got != want || rec.text() != want {
		t.Errorf("Text = %q, deltas make %q; want %q", got, rec.text(), want)
	}
	if len(rec.deltas) != 9 {
		t.Errorf("got %d deltas, want the recording's 9", len(rec.deltas))
	}
	for _, d := range rec.deltas {
		if d.Attempt != 1 {
			t.Errorf("delta %+v, want attempt 1", d)
		}
	}
}

// TestStreamTooLarge: a stream longer than sampler.MaxReplyBytes fails,
// whether the provider's own client cuts it or a given client does not.
func TestStreamTooLarge(t *testing.T) {
	line := ": " + strings.Repeat("x", 61) + "\n\n" // small events: the whole stream is what is too large
	body := sse(chunkOf(`{"content":"Hi"}`, "")) + strings.Repeat(line, sampler.MaxReplyBytes/len(line)+1)
	tests := []struct {
		name   string
		client func(t *testing.T) *http.Client
	}{
		{"own client", func(*testing.T) *http.Client { return nil }},
		{"given client", func(t *testing.T) *http.Client {
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			return &http.Client{Transport: tr}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{stream: true, body: body})
			p := New(Options{BaseURL: f.srv.URL, HTTPClient: tt.client(t)})
			_, err := p.Stream(context.Background(), helloRequest(), func(sampler.Delta) {})
			want := &sampler.UpstreamError{Provider: "openai", Status: 200, Message: "the reply exceeds 16 MiB"}
			if diff := cmp.Diff(want, asUpstream(t, err), ignoreErr()); diff != "" {
				t.Errorf("UpstreamError (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreamConnectionReuse: a stream read to [DONE] leaves its connection
// to the next call, streamed or not.
func TestStreamConnectionReuse(t *testing.T) {
	stream := readTestdata(t, "streams/text.sse")
	var dials atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		// The body's end comes a little after [DONE], as over a network.
		_, _ = w.Write(stream)
		_ = http.NewResponseController(w).Flush()
		time.Sleep(5 * time.Millisecond)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := New(Options{BaseURL: srv.URL})
	for i := range 3 {
		if _, err := p.Stream(context.Background(), helloRequest(), func(sampler.Delta) {}); err != nil {
			t.Fatalf("call %d: Stream: %v", i, err)
		}
	}
	if got := dials.Load(); got != 1 {
		t.Errorf("three streams opened %d connections, want 1", got)
	}
}

// TestStreamHeldAfterDone: a server that keeps the body open after [DONE]
// does not hold the answer back; the connection is given up.
func TestStreamHeldAfterDone(t *testing.T) {
	f := newFake(t, reply{file: "streams/text.sse", stream: true, hold: true})
	p := New(Options{BaseURL: f.srv.URL})
	done := make(chan error, 1)
	go func() {
		_, err := p.Stream(context.Background(), helloRequest(), func(sampler.Delta) {})
		done <- err
	}()
	testwait.Recv(t, f.arrived, "the stream to reach the fake")
	start := time.Now()
	if err := testwait.Recv(t, done, "Stream to return"); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if d := time.Since(start); d > 4*drainWait {
		t.Errorf("Stream returned %v after [DONE], want about %v", d, drainWait)
	}
	testwait.Recv(t, f.gone, "the fake to see the client leave")
}
