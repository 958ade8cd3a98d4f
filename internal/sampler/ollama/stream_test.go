package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// textDeltas returns one text delta for each of parts.
func textDeltas(parts ...string) []sampler.Delta {
	out := make([]sampler.Delta, len(parts))
	for i, p := range parts {
		out[i] = sampler.Delta{Text: p}
	}
	return out
}

// TestStream replays recorded streams of answers TestSample reads whole:
// Stream hands on each line's fragment as it comes and returns the
// Response Sample returns for the same answer, from a request that differs
// from Sample's only in asking for a stream.
func TestStream(t *testing.T) {
	weather := "What is the weather today in Paris and London?"
	tests := []struct {
		name          string
		req           *sampler.Request
		whole, stream string
		want          []sampler.Delta
	}{
		{
			name: "text",
			req: &sampler.Request{Model: "llama3.2", SystemPrompt: "You are a friendly assistant.", MaxTokens: 256,
				Messages: []sampler.Message{user(text("Hello!"))}, Temperature: ptr(0.7)},
			whole:  "text.json",
			stream: "stream_text.ndjson",
			want:   textDeltas("Hello", "!", " How", " are", " you", " today", "?"),
		},
		{
			// The done line is the last of the reply, without a newline.
			name:   "last_line_unended",
			req:    &sampler.Request{Model: "llama3.2", MaxTokens: 256, Messages: []sampler.Message{user(text("Hello!"))}},
			whole:  "text.json",
			stream: "stream_unended.ndjson",
			want:   textDeltas("Hello", "!", " How", " are", " you", " today", "?"),
		},
		{
			name: "structured",
			req: &sampler.Request{Model: "llama3.1", MaxTokens: 128, Schema: json.RawMessage(ageSchema),
				Messages: []sampler.Message{user(text("Ollama is 22 years old and busy saving the world."))}},
			whole:  "structured.json",
			stream: "stream_structured.ndjson",
			want:   textDeltas(`{"`, "age", `":`, " ", "22", ",", ` "`, "available", `":`, " false", "}"),
		},
		{
			name:   "max_tokens",
			req:    &sampler.Request{Model: "llama3.2", MaxTokens: 16, Messages: []sampler.Message{user(text("Why is the sky blue?"))}},
			whole:  "max_tokens.json",
			stream: "stream_max_tokens.ndjson",
			want: textDeltas("The", " sky", " is", " blue", " because", " of", " a", " phenomenon", " called",
				" Rayleigh", " scattering", ".", " Sun", "light"),
		},
		{
			// Calls come whole, one a line, with ids of Ollama's own that
			// are not kept: Sample gives its own.
			name:   "parallel_tool_calls",
			req:    &sampler.Request{Model: "llama3.2", MaxTokens: 256, Messages: []sampler.Message{user(text(weather))}, Tools: tools(t, weatherTool, timeTool)},
			whole:  "parallel_tool_calls.json",
			stream: "stream_parallel_tool_calls.ndjson",
			want: []sampler.Delta{
				{ToolCall: &sampler.ToolCallDelta{Index: 0, ID: "call_0_7e069917", Name: "get_current_weather", Arguments: `{"format":"celsius","location":"Paris, FR"}`}},
				{ToolCall: &sampler.ToolCallDelta{Index: 1, ID: "call_1_5f4375dc", Name: "get_current_weather", Arguments: `{"format":"celsius","location":"London, UK"}`}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{file: tt.whole}, reply{file: tt.stream, stream: true})
			p := f.provider(t)
			want, err := p.Sample(t.Context(), tt.req)
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			var deltas []sampler.Delta
			got, err := p.Stream(t.Context(), tt.req, func(d sampler.Delta) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Stream's response differs from Sample's (-Sample +Stream):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			// The fragments make the answer: its text, and its calls.
			var joined strings.Builder
			var calls []sampler.ToolCallDelta
			for _, d := range deltas {
				joined.WriteString(d.Text)
				if d.ToolCall != nil {
					calls = append(calls, *d.ToolCall)
				}
			}
			if s := sampler.TextOf(got.Content); joined.String() != s {
				t.Errorf("text fragments join to %q, want the answer's %q", joined.String(), s)
			}
			var wantCalls []sampler.ToolCallDelta
			for _, c := range got.Content {
				if c.Type == sampler.BlockToolUse {
					wantCalls = append(wantCalls, sampler.ToolCallDelta{Index: len(wantCalls), ID: c.ID, Name: c.Name, Arguments: string(c.Input)})
				}
			}
			if diff := cmp.Diff(wantCalls, calls); diff != "" {
				t.Errorf("call fragments (-answer +streamed):\n%s", diff)
			}

			bodies := f.requests()
			var sampled, streamed map[string]any
			if err := json.Unmarshal(bodies[0], &sampled); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(bodies[1], &streamed); err != nil {
				t.Fatal(err)
			}
			if sampled["stream"] != false || streamed["stream"] != true {
				t.Errorf("stream is %v for Sample and %v for Stream, want false and true", sampled["stream"], streamed["stream"])
			}
			delete(sampled, "stream")
			delete(streamed, "stream")
			if diff := cmp.Diff(sampled, streamed); diff != "" {
				t.Errorf("streamed request differs from Sample's beyond stream (-Sample +Stream):\n%s", diff)
			}
		})
	}
}

// TestStreamErrors: an error line is an upstream error, a stream without
// its done line or with a malformed line is one, and an error status
// before the stream is what Sample makes of it; fragments before the error
// have been handed on.
func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name          string
		reply         reply
		want          *sampler.UpstreamError
		wantRetryable bool
		deltas        []sampler.Delta
	}{
		{
			name:  "error_line",
			reply: reply{file: "stream_error.ndjson", stream: true},
			want: &sampler.UpstreamError{Provider: "ollama", Status: http.StatusBadGateway,
				Message: "an error was encountered while running the model: unexpected EOF"},
			wantRetryable: true,
			deltas:        textDeltas("Once", " upon", " a"),
		},
		{
			name:          "no_done_line",
			reply:         reply{file: "stream_truncated.ndjson", stream: true},
			want:          &sampler.UpstreamError{Provider: "ollama", Message: "the stream ended before its done line"},
			wantRetryable: true,
			deltas:        textDeltas("Once", " upon", " a"),
		},
		{
			name:   "malformed_line",
			reply:  reply{file: "stream_malformed.ndjson", stream: true},
			want:   &sampler.UpstreamError{Provider: "ollama", Status: 200, Message: "malformed stream line"},
			deltas: textDeltas("Once"),
		},
		{
			name:          "busy_before_the_stream",
			reply:         reply{status: 503, file: "error_busy.json", retryAfter: "7", stream: true},
			want:          &sampler.UpstreamError{Provider: "ollama", Status: 503, RetryAfter: 7 * time.Second, Message: "server busy, please try again.  maximum pending requests exceeded"},
			wantRetryable: true,
		},
		{
			name:  "model_not_found",
			reply: reply{status: 404, file: "error_model_not_found.json", stream: true},
			want:  &sampler.UpstreamError{Provider: "ollama", Status: 404, Message: `model "llama9" not found, try pulling it first`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			var deltas []sampler.Delta
			resp, err := f.provider(t).Stream(t.Context(), &sampler.Request{Model: "llama3.2", Messages: []sampler.Message{user(text("Tell me a story."))}},
				func(d sampler.Delta) { deltas = append(deltas, d) })
			if resp != nil {
				t.Errorf("response %+v with the error", resp)
			}
			var ue *sampler.UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("Stream error = %v, want a *sampler.UpstreamError", err)
			}
			if diff := cmp.Diff(tt.want, ue, upstreamOpts); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got := retry.Retryable(err); got != tt.wantRetryable {
				t.Errorf("retry.Retryable = %v, want %v", got, tt.wantRetryable)
			}
			if diff := cmp.Diff(tt.deltas, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreamCancelled: cancelling the context ends a stream that Ollama
// keeps open, at once, as a cancellation, also when cancelled with a
// cause as the Service does; Ollama sees the client go.
func TestStreamCancelled(t *testing.T) {
	f := newFake(t, reply{file: "stream_truncated.ndjson", stream: true, hold: true})
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	first := make(chan sampler.Delta, 10)
	errc := make(chan error, 1)
	p := f.provider(t)
	go func() {
		_, err := p.Stream(ctx, &sampler.Request{Model: "llama3.2", Messages: []sampler.Message{user(text("hi"))}}, func(d sampler.Delta) { first <- d })
		errc <- err
	}()
	if d := <-first; d.Text != "Once" {
		t.Errorf("first delta %+v, want the first line's text", d)
	}
	<-f.arrived
	start := time.Now()
	cancel(errors.New("no fragment in time"))
	select {
	case err := <-errc:
		var ue *sampler.UpstreamError
		if !errors.As(err, &ue) || ue.Message != "request cancelled" || ue.Timeout {
			t.Errorf("Stream error = %#v, want a cancelled upstream call", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("errors.Is(%v, context.Canceled) = false, want true", err)
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
	select {
	case <-f.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream never saw the client go")
	}
}

// TestStreamConnectionBreaks: a connection lost mid-stream is an upstream
// error without status that says so.
func TestStreamConnectionBreaks(t *testing.T) {
	lines := readReply(t, "stream_truncated.ndjson")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		// A chunked reply whose last chunk never comes.
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(lines), lines)
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	var deltas []sampler.Delta
	_, err := newProvider(t, Options{BaseURL: srv.URL}).Stream(t.Context(), &sampler.Request{Model: "llama3.2", Messages: []sampler.Message{user(text("hi"))}},
		func(d sampler.Delta) { deltas = append(deltas, d) })
	var ue *sampler.UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("Stream error = %v, want a *sampler.UpstreamError", err)
	}
	want := &sampler.UpstreamError{Provider: "ollama", Message: "the connection broke off mid-stream"}
	if diff := cmp.Diff(want, ue, upstreamOpts); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if !retry.Retryable(err) {
		t.Errorf("a broken connection is not retryable: %v", err)
	}
	if diff := cmp.Diff(textDeltas("Once", " upon", " a"), deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
}

// TestStreamTooLarge: a stream is bounded as a whole reply is: by the
// provider's own client (sampler.MaxReplyBytes), and by maxSuccessBody
// with any client; lines are never cut into an answer.
func TestStreamTooLarge(t *testing.T) {
	line, _ := json.Marshal(chatResponse{Model: "llama3.2", Message: chatMessage{Role: roleAssistant, Content: strings.Repeat("a", 64<<10)}})
	line = append(line, '\n')
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		for n := 0; n <= maxSuccessBody/len(line)+1; n++ {
			if _, err := w.Write(line); err != nil {
				return // the client gave up
			}
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name  string
		o     Options
		limit int
		want  string
	}{
		{"own client", Options{BaseURL: srv.URL}, sampler.MaxReplyBytes, sampler.ErrReplyTooLarge.Error()},
		{"given client", Options{BaseURL: srv.URL, HTTPClient: &http.Client{Transport: &http.Transport{}}}, maxSuccessBody, "response body exceeds 32 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, tt.o)
			if tt.o.HTTPClient != nil {
				t.Cleanup(tt.o.HTTPClient.CloseIdleConnections)
			}
			var got int
			_, err := p.Stream(t.Context(), &sampler.Request{Model: "llama3.2", Messages: []sampler.Message{user(text("hi"))}},
				func(d sampler.Delta) {
					got += len(d.Text)
					if len(d.Text) != 64<<10 || strings.Trim(d.Text, "a") != "" {
						t.Errorf("fragment of %d bytes, not a whole line's", len(d.Text))
					}
				})
			var ue *sampler.UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("Stream error = %v, want a *sampler.UpstreamError", err)
			}
			want := &sampler.UpstreamError{Provider: "ollama", Status: 200, Message: tt.want}
			if diff := cmp.Diff(want, ue, upstreamOpts); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got > tt.limit {
				t.Errorf("%d bytes of text handed on, more than the bound %d", got, tt.limit)
			}
		})
	}
}
