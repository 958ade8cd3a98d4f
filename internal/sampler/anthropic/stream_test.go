package anthropic

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// callDelta is a tool-call fragment.
func callDelta(index int, id, name, args string) sampler.Delta {
	return sampler.Delta{ToolCall: &sampler.ToolCallDelta{Index: index, ID: id, Name: name, Arguments: args}}
}

// joined returns the text and each call's arguments that deltas make,
// joined in order, and fails when a call's fragments disagree on its id or
// name.
func joined(t *testing.T, deltas []sampler.Delta) (string, map[string]string) {
	t.Helper()
	var text strings.Builder
	args := map[string]string{}
	ids := map[int]string{}
	for _, d := range deltas {
		text.WriteString(d.Text)
		if c := d.ToolCall; c != nil {
			if id, ok := ids[c.Index]; ok && id != c.ID+"/"+c.Name {
				t.Errorf("call %d: fragment of %s/%s, want %s", c.Index, c.ID, c.Name, id)
			}
			ids[c.Index] = c.ID + "/" + c.Name
			args[c.ID] += c.Arguments
		}
	}
	return text.String(), args
}

// wholeOf returns the text and each call's arguments of resp.
func wholeOf(resp *sampler.Response) (string, map[string]string) {
	args := map[string]string{}
	for _, c := range resp.Content {
		if c.Type == sampler.BlockToolUse {
			args[c.ID] = string(c.Input)
		}
	}
	return sampler.TextOf(resp.Content), args
}

// TestStream replays recorded streams of the answers TestSample reads
// whole: Stream hands on each fragment as it comes, and returns the
// Response Sample returns for the same answer, from a request that differs
// from Sample's only in asking for a stream.
func TestStream(t *testing.T) {
	tests := []struct {
		name          string
		req           sampler.Request
		whole, stream string
		want          []sampler.Delta
	}{
		{
			name:   "text",
			req:    sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 1024, Messages: []sampler.Message{user(text("What is in this image?"))}},
			whole:  "text.json",
			stream: "stream_text.sse",
			want:   []sampler.Delta{{Text: "Hello"}, {Text: "! The image"}, {Text: " shows a red"}, {Text: " square."}},
		},
		{
			name: "parallel_tool_calls",
			req: sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 1024,
				Messages:   []sampler.Message{user(text("What's the weather and the time in San Francisco?"))},
				Tools:      []sampler.Tool{weatherTool(), timeTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}},
			whole:  "parallel_tool_use.json",
			stream: "stream_tool_use.sse",
			want: []sampler.Delta{
				{Text: "I'll check the weather"},
				{Text: " and the time in San Francisco."},
				callDelta(0, "toolu_01WeatherSF", "get_weather", ""),
				callDelta(0, "toolu_01WeatherSF", "get_weather", `{"location":"San`),
				callDelta(0, "toolu_01WeatherSF", "get_weather", ` Francisco, CA"}`),
				callDelta(1, "toolu_01TimeSF", "get_time", ""),
				callDelta(1, "toolu_01TimeSF", "get_time", `{"timezone":`),
				callDelta(1, "toolu_01TimeSF", "get_time", `"America/Los_Angeles"}`),
			},
		},
		{
			// The respond tool's input is the answer's text.
			name: "schema_tool",
			req: sampler.Request{Model: "claude-3-5-haiku-20241022", MaxTokens: 1024,
				Messages: []sampler.Message{user(text("Extract the contact: John Smith (john@example.com) wants an Enterprise demo."))},
				Schema:   json.RawMessage(contactSchema)},
			whole:  "schema_tool.json",
			stream: "stream_schema_tool.sse",
			want: []sampler.Delta{
				{Text: `{"name":"John Smith",`},
				{Text: `"email":"john@example.com","plan_`},
				{Text: `interest":"Enterprise","demo_requested":true}`},
			},
		},
		{
			// Text besides the respond call is not the answer.
			name: "schema_tool_preamble",
			req: sampler.Request{Model: "claude-3-5-haiku-20241022", MaxTokens: 1024,
				Messages: []sampler.Message{user(text("Extract the contact: John Smith (john@example.com) wants an Enterprise demo."))},
				Schema:   json.RawMessage(contactSchema)},
			whole:  "schema_tool_preamble.json",
			stream: "stream_schema_tool_preamble.sse",
			want: []sampler.Delta{
				{Text: `{"name":"John Smith","email":"john@example.com",`},
				{Text: `"plan_interest":"Enterprise","demo_requested":true}`},
			},
		},
		{
			// A call without input has the {} it started with.
			name: "tool_call_without_input",
			req: sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 1024,
				Messages: []sampler.Message{user(text("What time is it?"))},
				Tools:    []sampler.Tool{{Name: "get_time", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
			whole:  "tool_use_no_input.json",
			stream: "stream_tool_use_no_input.sse",
			want: []sampler.Delta{
				callDelta(0, "toolu_01NoInput0000000000000", "get_time", ""),
				callDelta(0, "toolu_01NoInput0000000000000", "get_time", "{}"),
			},
		},
		{
			// A wrapped answer is known once its input is whole.
			name: "schema_tool_wrapped",
			req: sampler.Request{Model: "claude-3-5-haiku-20241022", MaxTokens: 1024,
				Messages: []sampler.Message{user(text("Name the three primary colours of light."))},
				Schema:   json.RawMessage(`{"type":"array","items":{"type":"string"},"minItems":3}`)},
			whole:  "schema_tool_wrapped.json",
			stream: "stream_schema_tool_wrapped.sse",
			want:   []sampler.Delta{{Text: `["red","green","blue"]`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{file: tt.whole}, reply{file: tt.stream, stream: true})
			p := f.provider()
			want, err := p.Sample(context.Background(), &tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			var deltas []sampler.Delta
			got, err := p.Stream(context.Background(), &tt.req, func(d sampler.Delta) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Stream's response differs from Sample's (-Sample +Stream):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			text, args := joined(t, deltas)
			wantText, wantArgs := wholeOf(got)
			if text != wantText {
				t.Errorf("text fragments join to %q, want the answer's %q", text, wantText)
			}
			if diff := cmp.Diff(wantArgs, args); diff != "" {
				t.Errorf("argument fragments (-answer +joined):\n%s", diff)
			}

			reqs := f.requests()
			checkHeaders(t, reqs)
			sampled, streamed := decode(t, reqs[0].body), decode(t, reqs[1].body)
			if streamed["stream"] != true {
				t.Errorf(`streamed request has stream = %v, want true`, streamed["stream"])
			}
			delete(streamed, "stream")
			if diff := cmp.Diff(sampled, streamed); diff != "" {
				t.Errorf("streamed request differs from Sample's beyond stream (-Sample +Stream):\n%s", diff)
			}
		})
	}
}

// TestStreamErrors: an error event is classified by its type, a stream
// cut short or malformed is an upstream error, and an error status before
// the stream is what Sample makes of it; the fragments before the error
// have been handed on.
func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name   string
		reply  reply
		want   upstreamView
		deltas []sampler.Delta
	}{
		{
			name:   "overloaded_event",
			reply:  reply{file: "stream_error.sse", stream: true},
			want:   upstreamView{Provider: "anthropic", Status: 529, Message: "Overloaded", Retryable: true, Reason: "server_error"},
			deltas: []sampler.Delta{{Text: "Hello"}},
		},
		{
			name:  "error_event_echoing_the_key",
			reply: reply{file: "stream_error_key.sse", stream: true},
			want:  upstreamView{Provider: "anthropic", Status: 401, Message: "invalid x-api-key: [redacted]", Reason: "client_error"},
		},
		{
			name:   "no_message_stop",
			reply:  reply{file: "stream_truncated.sse", stream: true},
			want:   upstreamView{Provider: "anthropic", Message: "the stream ended before message_stop", Retryable: true, Reason: "connection"},
			deltas: []sampler.Delta{{Text: "Hello, wor"}},
		},
		{
			name:  "malformed_event",
			reply: reply{file: "stream_malformed.sse", stream: true},
			want:  upstreamView{Provider: "anthropic", Status: 200, Message: "malformed response", Reason: "client_error"},
		},
		{
			name:  "delta_of_no_block",
			reply: reply{file: "stream_bad_index.sse", stream: true},
			want:  upstreamView{Provider: "anthropic", Status: 200, Message: "malformed stream", Reason: "client_error"},
		},
		{
			name:  "rate_limited_before_the_stream",
			reply: reply{status: http.StatusTooManyRequests, file: "error_429.json", header: map[string]string{"retry-after": "7"}, stream: true},
			want: upstreamView{Provider: "anthropic", Status: 429, RetryAfter: 7 * time.Second,
				Message: "Number of request tokens has exceeded your per-minute rate limit", Retryable: true, Reason: "rate_limited"},
		},
		{
			name:  "unauthorized_before_the_stream",
			reply: reply{status: http.StatusUnauthorized, file: "error_401.json", stream: true},
			want:  upstreamView{Provider: "anthropic", Status: 401, Message: "invalid x-api-key: [redacted]", Reason: "client_error"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			var deltas []sampler.Delta
			resp, err := f.provider().Stream(context.Background(), &sampler.Request{
				Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))},
			}, func(d sampler.Delta) { deltas = append(deltas, d) })
			if resp != nil {
				t.Errorf("response %+v with the error", resp)
			}
			if diff := cmp.Diff(tt.want, viewOf(t, err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.deltas, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("upstream saw %d requests, want 1", n)
			}
		})
	}
}

// TestStreamEventStatus: each documented error type has its status;
// unknown ones are a bad gateway.
func TestStreamEventStatus(t *testing.T) {
	for typ, want := range map[string]int{
		"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
		"permission_error": 403, "not_found_error": 404, "request_too_large": 413,
		"rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
		"": 502, "brand_new_error": 502,
	} {
		if got := eventStatus(typ); got != want {
			t.Errorf("eventStatus(%q) = %d, want %d", typ, got, want)
		}
	}
}

// TestStreamCancelled: cancelling the context ends a stream that the
// upstream keeps open, at once, and the upstream sees the client go.
func TestStreamCancelled(t *testing.T) {
	f := newFake(t, reply{file: "stream_truncated.sse", stream: true, hold: true})
	// The Service cancels with a cause, which net/http hands on in place
	// of context.Canceled.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	first := make(chan sampler.Delta, 10)
	errc := make(chan error, 1)
	go func() {
		_, err := f.provider().Stream(ctx, &sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))}},
			func(d sampler.Delta) { first <- d })
		errc <- err
	}()
	if d := <-first; d.Text != "Hello, wor" {
		t.Errorf("first delta %+v, want the text fragment", d)
	}
	<-f.arrived // all sent, the stream held open
	start := time.Now()
	cancel(errors.New("no fragment in time"))
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("errors.Is(%v, context.Canceled) = false, want true", err)
		}
		if view := viewOf(t, err); view.Timeout {
			t.Errorf("a cancellation must not read as a timeout: %+v", view)
		}
		if retry.Retryable(err) {
			t.Errorf("retry.Retryable(%v) = true, want false", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Stream returned %v after the cancellation", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return after the cancellation")
	}
	<-f.gone
}

// TestStreamConnectionBreaks: a connection lost mid-stream is an upstream
// error without status that says so.
func TestStreamConnectionBreaks(t *testing.T) {
	events, err := os.ReadFile(filepath.Join("testdata", "anthropic", "replies", "stream_truncated.sse"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		// A chunked reply whose last chunk never comes.
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(events), events)
		_ = buf.Flush()
	}))
	defer srv.Close()
	p := New(Options{BaseURL: srv.URL, APIKey: testKey, HTTPClient: srv.Client()})
	var deltas []sampler.Delta
	_, err = p.Stream(context.Background(), &sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))}},
		func(d sampler.Delta) { deltas = append(deltas, d) })
	want := upstreamView{Provider: "anthropic", Message: "the connection broke off mid-stream", Retryable: true, Reason: "connection"}
	if diff := cmp.Diff(want, viewOf(t, err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if len(deltas) != 1 {
		t.Errorf("deltas %+v, want the one fragment sent", deltas)
	}
}

// TestStreamTooLarge: the provider's own client reads no more of a stream
// than of a whole reply, sampler.MaxReplyBytes.
func TestStreamTooLarge(t *testing.T) {
	chunk := strings.Repeat("a", 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriter(w)
		fmt.Fprint(bw, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
		fmt.Fprint(bw, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		for n := 0; n <= sampler.MaxReplyBytes/len(chunk); n++ {
			if _, err := fmt.Fprintf(bw, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", chunk); err != nil {
				return // the client gave up
			}
		}
		_ = bw.Flush()
	}))
	defer srv.Close()
	// No HTTPClient: the provider's own, whose replies are bounded.
	p := New(Options{BaseURL: srv.URL, APIKey: testKey})
	var got int
	_, err := p.Stream(context.Background(), &sampler.Request{Model: "claude-sonnet-4-5", MaxTokens: 16, Messages: []sampler.Message{user(text("Hi"))}},
		func(d sampler.Delta) { got += len(d.Text) })
	want := upstreamView{Provider: "anthropic", Status: 200, Message: sampler.ErrReplyTooLarge.Error(), Reason: "client_error"}
	if diff := cmp.Diff(want, viewOf(t, err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if got > sampler.MaxReplyBytes {
		t.Errorf("%d bytes of text handed on, more than the bound", got)
	}
}

// TestJSONSpace: space between the tokens of JSON text that arrives in
// pieces is dropped as json.Compact drops it, space in strings kept.
func TestJSONSpace(t *testing.T) {
	pieces := []string{"{ \"a b\" :", " [1, \"\\\"", " x\\\\\" ,\n", "\t2 ] }"}
	var j jsonSpace
	var got strings.Builder
	for _, p := range pieces {
		got.WriteString(j.drop(p))
	}
	want := string(sampler.CompactJSON([]byte(strings.Join(pieces, ""))))
	if got.String() != want {
		t.Errorf("joined %q, want %q", got.String(), want)
	}
}
