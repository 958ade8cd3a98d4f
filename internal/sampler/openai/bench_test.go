package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sampled/sampled/internal/sampler"
)

// BenchmarkSample measures one Sample call, encoding, HTTP exchange over
// loopback and decoding, against an upstream that answers at once with a
// canned reply. The upstream's own work (reading the body, writing the
// reply) is counted too; it is the same before and after any change here.
func BenchmarkSample(b *testing.B) {
	benches := []struct {
		name  string
		reply string
		req   *sampler.Request
	}{
		{
			name:  "text",
			reply: "replies/text.json",
			req: &sampler.Request{Model: "gpt-4.1", SystemPrompt: "You are a helpful assistant.",
				Messages: []sampler.Message{userText("Hello!")}, MaxTokens: 256},
		},
		{
			name:  "schema",
			reply: "replies/schema.json",
			req: &sampler.Request{Model: "gpt-4o-2024-08-06", SystemPrompt: "Extract the event information.",
				Messages:  []sampler.Message{userText("Alice and Bob are going to a science fair on Friday.")},
				MaxTokens: 512, Schema: json.RawMessage(eventSchema)},
		},
		{
			name:  "tool_call",
			reply: "replies/tool_call.json",
			req: &sampler.Request{Model: "gpt-4o-mini",
				Messages:  []sampler.Message{userText("What's the weather like in Boston today?")},
				MaxTokens: 1024, Tools: []sampler.Tool{weatherTool()},
				ToolChoice: &sampler.ToolChoice{Mode: sampler.ToolChoiceRequired}},
		},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			p := New(Options{BaseURL: benchUpstream(b, bb.reply), APIKey: testKey})
			ctx := context.Background()
			if _, err := p.Sample(ctx, bb.req); err != nil {
				b.Fatalf("Sample: %v", err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Sample(ctx, bb.req); err != nil {
					b.Fatalf("Sample: %v", err)
				}
			}
		})
	}
}

// benchUpstream starts an upstream that drains each request and answers
// with the testdata file reply, and returns its URL.
func benchUpstream(b *testing.B, reply string) string {
	b.Helper()
	out := readTestdata(b, reply)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkStream measures one Stream call against an upstream that sends
// a recorded stream of 258 small chunks (256 fragments of text) at once:
// encoding, the HTTP exchange over loopback, reading the events, decoding
// each chunk and emitting its fragment, and mapping the answer.
func BenchmarkStream(b *testing.B) {
	out := readTestdata(b, "streams/long_text.sse")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(out)
	}))
	b.Cleanup(srv.Close)
	p := New(Options{BaseURL: srv.URL, APIKey: testKey})
	req := &sampler.Request{Model: "gpt-4.1-mini", SystemPrompt: "You are a helpful assistant.",
		Messages: []sampler.Message{userText("Tell me a story.")}, MaxTokens: 256}
	ctx := context.Background()
	fragments := 0
	emit := func(sampler.Delta) { fragments++ }
	if _, err := p.Stream(ctx, req, emit); err != nil {
		b.Fatalf("Stream: %v", err)
	}
	if fragments != 256 {
		b.Fatalf("Stream emitted %d fragments, want 256", fragments)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Stream(ctx, req, emit); err != nil {
			b.Fatalf("Stream: %v", err)
		}
	}
}

// BenchmarkSampleParallel runs text Sample calls from 32 goroutines per
// CPU (64 on two cores), as a gateway under load does: it measures what
// connection reuse and contention cost on top of one call.
func BenchmarkSampleParallel(b *testing.B) {
	p := New(Options{BaseURL: benchUpstream(b, "replies/text.json"), APIKey: testKey})
	req := &sampler.Request{Model: "gpt-4.1", SystemPrompt: "You are a helpful assistant.",
		Messages: []sampler.Message{userText("Hello!")}, MaxTokens: 256}
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := p.Sample(ctx, req); err != nil {
				b.Errorf("Sample: %v", err)
				return
			}
		}
	})
}
