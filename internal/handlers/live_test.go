package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/sampler"
)

// postStream sends body to path with the given headers and reads the
// answer: its status, Content-Type and, for an event stream, its events.
func (s *stack) postStream(t *testing.T, path, body string, header ...string) (int, string, []loopEvent, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if ct != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, ct, nil, raw
	}
	return resp.StatusCode, ct, readEvents(t, resp.Body), nil
}

// joined is the text of a stream's delta events of attempt a, in order.
func joined(t *testing.T, evs []loopEvent, a int) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		if ev.Name != eventDelta {
			continue
		}
		var d sampler.Delta
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatal(err)
		}
		if d.Attempt == a {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// TestSampleStreams: "stream": true, or Accept: text/event-stream, turns a
// sampling answer into deltas and a result whose text they make.
func TestSampleStreams(t *testing.T) {
	s := startStack(t, 0)
	for _, tt := range []struct {
		name, body string
		header     []string
	}{
		{"body member", `{"prompt":"Say hello to the stream","stream":true}`, nil},
		{"Accept header", `{"prompt":"Say hello to the stream"}`, []string{"Accept", "application/json, text/event-stream"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, ct, evs, raw := s.postStream(t, "/v1/sample", tt.body, tt.header...)
			if status != http.StatusOK || evs == nil {
				t.Fatalf("%d %s: %s", status, ct, raw)
			}
			last := evs[len(evs)-1]
			if last.Name != eventResult || names(evs)[0] != eventDelta {
				t.Fatalf("events %v; want deltas, then result", names(evs))
			}
			var res resultBody
			if err := json.Unmarshal([]byte(last.Data), &res); err != nil {
				t.Fatal(err)
			}
			if got := joined(t, evs, 1); got != res.Text || got == "" {
				t.Errorf("deltas make %q; the result's text is %q", got, res.Text)
			}
		})
	}
}

// TestSampleSchemaStreamsAttempts: a guaranteed helper's failed attempt
// streams, then an attempt event names its errors, then the attempt that
// passed streams and the result holds its parsed value.
func TestSampleSchemaStreamsAttempts(t *testing.T) {
	s := startStack(t, 0)
	body := `{"prompt":"a person","model":"offline/flaky","stream":true,
		"schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`
	status, _, evs, raw := s.postStream(t, "/v1/sample/schema", body)
	if status != http.StatusOK || evs == nil {
		t.Fatalf("%d: %s", status, raw)
	}
	var attempts []attemptEvent
	for _, ev := range evs {
		if ev.Name == eventAttempt {
			var a attemptEvent
			if err := json.Unmarshal([]byte(ev.Data), &a); err != nil {
				t.Fatal(err)
			}
			attempts = append(attempts, a)
		}
	}
	if len(attempts) != 1 || attempts[0].Attempt != 2 || len(attempts[0].Errors) == 0 {
		t.Fatalf("attempt events %+v; want one, for attempt 2, with the errors", attempts)
	}
	// The corrective turn sent before attempt 2 names each error's path.
	fix := attempts[0].Correction
	if fix == nil || fix.Role != sampler.RoleUser || len(fix.Content) != 1 {
		t.Fatalf("correction %+v; want the corrective user turn", fix)
	}
	for _, e := range attempts[0].Errors {
		if !strings.Contains(fix.Content[0].Text, e.Path+": ") {
			t.Errorf("corrective turn %q does not name %s", fix.Content[0].Text, e.Path)
		}
	}
	var res resultBody
	if err := json.Unmarshal([]byte(evs[len(evs)-1].Data), &res); err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || joined(t, evs, 2) != res.Text || json.Valid([]byte(joined(t, evs, 1))) {
		t.Errorf("attempts %d; attempt 1 streamed %q, attempt 2 %q, result text %q", res.Attempts, joined(t, evs, 1), joined(t, evs, 2), res.Text)
	}
}

// TestStreamErrors: a request that fails before any event is a problem
// with its status; one that fails after the stream began ends with an
// error event carrying the problem.
func TestStreamErrors(t *testing.T) {
	p := &brokenStream{}
	s := startStack(t, 0, p)
	status, ct, _, raw := s.postStream(t, "/v1/sample", `{"prompt":"","stream":true}`)
	if status != http.StatusBadRequest || ct != "application/problem+json" {
		t.Errorf("invalid request: %d %s %s; want a 400 problem", status, ct, raw)
	}
	status, ct, _, raw = s.postStream(t, "/v1/messages", `{"messages":[],"maxTokens":5,"stream":"yes"}`)
	if status != http.StatusBadRequest || !strings.Contains(string(raw), `"/stream"`) || !strings.Contains(string(raw), "-32602") {
		t.Errorf("bad stream member: %d %s %s; want a 400 naming /stream with code -32602", status, ct, raw)
	}
	_, _, evs, raw := s.postStream(t, "/v1/sample", `{"prompt":"hi","model":"broken/m","stream":true}`)
	if diff := cmp.Diff([]string{eventDelta, eventError}, names(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s%s", diff, raw)
	}
	var prob Problem
	if err := json.Unmarshal([]byte(evs[1].Data), &prob); err != nil || prob.Status != http.StatusBadGateway {
		t.Errorf("error event %s; want a 502 problem", evs[1].Data)
	}
}

// TestMessagesStreams: /v1/messages streams too, ending with MCP's
// CreateMessageResult.
func TestMessagesStreams(t *testing.T) {
	s := startStack(t, 0)
	body := `{"messages":[{"role":"user","content":{"type":"text","text":"hello there"}}],"maxTokens":50,"stream":true}`
	status, _, evs, raw := s.postStream(t, "/v1/messages", body)
	if status != http.StatusOK || len(evs) == 0 || evs[len(evs)-1].Name != eventResult {
		t.Fatalf("%d %v %s", status, names(evs), raw)
	}
	var res struct {
		Role    string `json:"role"`
		Model   string `json:"model"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(evs[len(evs)-1].Data), &res); err != nil {
		t.Fatal(err)
	}
	if res.Role != "assistant" || res.Content.Text == "" || joined(t, evs, 1) != res.Content.Text {
		t.Errorf("result %+v; deltas %q", res, joined(t, evs, 1))
	}
}

// TestStreamClientGoneCancels: a client that goes away mid-stream cancels
// the provider's call.
func TestStreamClientGoneCancels(t *testing.T) {
	p := &brokenStream{hang: true, cancelled: make(chan struct{})}
	s := startStack(t, 0, p)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/sample", strings.NewReader(`{"prompt":"hi","model":"broken/m","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil { // the first delta arrived
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	<-p.cancelled // the call's context ended
}

// brokenStream streams one fragment, then fails, or hangs until its
// context ends (and says so).
type brokenStream struct {
	hang      bool
	cancelled chan struct{}
}

func (b *brokenStream) Name() string { return "broken" }

func (b *brokenStream) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	return b.Stream(ctx, req, func(sampler.Delta) {})
}

func (b *brokenStream) Stream(ctx context.Context, _ *sampler.Request, emit func(sampler.Delta)) (*sampler.Response, error) {
	emit(sampler.Delta{Text: "partial "})
	if b.hang {
		<-ctx.Done()
		close(b.cancelled)
		return nil, ctx.Err()
	}
	return nil, &sampler.UpstreamError{Provider: "broken", Message: "connection reset"}
}

// TestMessagesRefusesAnthropicShape: a body in Anthropic's Messages API
// shape gets a 400 that says what the route takes and where to go.
func TestMessagesRefusesAnthropicShape(t *testing.T) {
	s := startStack(t, 0)
	status, _, out := s.post(t, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":"Hello"}]}`)
	detail, _ := out["detail"].(string)
	if status != http.StatusBadRequest || !strings.Contains(detail, "Anthropic") || !strings.Contains(detail, "/openai/v1/chat/completions") {
		t.Errorf("%d %q; want a 400 naming Anthropic's API and the routes to use", status, detail)
	}
	if diff := cmp.Diff([]string{"/max_tokens", "/system", "/messages/0/content"}, errorPaths(out)); diff != "" {
		t.Errorf("error paths (-want +got):\n%s", diff)
	}
}
