package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// TestCompatibleServer points the adapter at an Ollama-style /v1 endpoint
// and checks the Authorization header with and without a key.
func TestCompatibleServer(t *testing.T) {
	tests := []struct {
		name     string
		key      string
		wantAuth []string
	}{
		{name: "no key sends no Authorization", key: "", wantAuth: nil},
		{name: "key sends a bearer token", key: testKey, wantAuth: []string{"Bearer " + testKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Ollama's reply leaves out logprobs and refusal, which OpenAI's
			// schema requires: it is not held to that schema.
			f := newFake(t, reply{file: "replies/ollama_text.json", compat: true})
			p := New(Options{Name: "ollama", BaseURL: f.srv.URL + "/v1/", APIKey: tt.key})
			got, err := p.Sample(context.Background(), &sampler.Request{
				Model:    "llama3.2",
				Messages: []sampler.Message{userText("Why is the sky blue?")},
			})
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			want := &sampler.Response{
				Model:      "llama3.2",
				Content:    []sampler.Content{sampler.TextBlock("The sky is blue because of Rayleigh scattering.")},
				StopReason: sampler.StopEndTurn,
				Usage:      sampler.Usage{InputTokens: 30, OutputTokens: 11},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Sample (-want +got):\n%s", diff)
			}
			reqs := f.received()
			if len(reqs) != 1 {
				t.Fatalf("upstream got %d requests, want 1", len(reqs))
			}
			if got, want := reqs[0].path, "/v1/chat/completions"; got != want {
				t.Errorf("path %q, want %q", got, want)
			}
			if diff := cmp.Diff(tt.wantAuth, reqs[0].header.Values("Authorization")); diff != "" {
				t.Errorf("Authorization (-want +got):\n%s", diff)
			}
			checkGolden(t, "ollama", reqs[0].body)
		})
	}
}

// TestKeyNeverInErrors makes the upstream answer 401 with a body that
// echoes the Authorization header, as JSON and as plain text, and checks
// that the key appears in no error text.
func TestKeyNeverInErrors(t *testing.T) {
	tests := []struct {
		name        string
		echo        func(r *http.Request) string
		wantMessage string
	}{
		{
			name: "OpenAI error JSON",
			echo: func(r *http.Request) string {
				return fmt.Sprintf(`{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","param":%q,"code":"invalid_api_key"}}`,
					r.Header.Get("Authorization"), r.Header.Get("Authorization"))
			},
			wantMessage: "Incorrect API key provided: Bearer [redacted].",
		},
		{
			name:        "plain text",
			echo:        func(r *http.Request) string { return "unauthorized: " + r.Header.Get("Authorization") + "\n" },
			wantMessage: "Unauthorized: unauthorized: Bearer [redacted]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{status: http.StatusUnauthorized, echo: tt.echo})
			p := New(Options{BaseURL: f.srv.URL, APIKey: testKey})
			_, err := p.Sample(context.Background(), helloRequest())
			ue := asUpstream(t, err)
			if ue.Status != http.StatusUnauthorized || ue.Message != tt.wantMessage {
				t.Errorf("UpstreamError = {Status: %d, Message: %q}, want {401, %q}", ue.Status, ue.Message, tt.wantMessage)
			}
			if retry.Retryable(err) {
				t.Error("401 must not be retryable")
			}
			if echoed := string(f.last(t)); strings.Contains(echoed, testKey) {
				t.Fatal("the request body holds the key")
			}
			texts := []string{fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%+v", *ue), ue.Message}
			for e := error(ue); e != nil; e = errors.Unwrap(e) {
				texts = append(texts, e.Error(), fmt.Sprintf("%+v", e))
			}
			texts = append(texts, fmt.Sprintf("%+v", p), fmt.Sprintf("%#v", p))
			for _, s := range texts {
				if strings.Contains(s, testKey) {
					t.Errorf("error text holds the API key: %s", s)
				}
			}
		})
	}
}

// TestReplyContent checks the forms a reply's message content takes: a
// string, null, or, from some compatible servers, an array of content
// parts whose text parts are joined.
func TestReplyContent(t *testing.T) {
	const head = `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"m","usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":`
	const tail = `}}]}`
	tests := []struct {
		name    string
		content string
		want    []sampler.Content
		wantErr string
	}{
		{name: "string with escapes", content: `"caf\u00e9 \"au\" lait\n"`, want: []sampler.Content{sampler.TextBlock("café \"au\" lait\n")}},
		{name: "null", content: `null`},
		{name: "parts", content: `[{"type":"text","text":"Hello, "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}},{"type":"text","text":"world."}]`,
			want: []sampler.Content{sampler.TextBlock("Hello, world.")}},
		{name: "number", content: `42`, wantErr: "unreadable reply: message content is neither a string nor an array: number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, reply{body: head + tt.content + tail, compat: true})
			p := New(Options{Name: "vllm", BaseURL: f.srv.URL})
			got, err := p.Sample(context.Background(), helloRequest())
			if tt.wantErr != "" {
				if ue := asUpstream(t, err); ue.Message != tt.wantErr || ue.Status != http.StatusOK {
					t.Errorf("UpstreamError = {Status: %d, Message: %q}, want {200, %q}", ue.Status, ue.Message, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			want := &sampler.Response{Model: "m", Content: tt.want, StopReason: sampler.StopEndTurn,
				Usage: sampler.Usage{InputTokens: 3, OutputTokens: 2}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Sample (-want +got):\n%s", diff)
			}
		})
	}
}
