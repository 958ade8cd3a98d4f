package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sampled/sampled/client"
)

func TestSampleModes(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	tests := []struct {
		name      string
		req       client.SampleRequest
		wantStop  string
		wantText  string // a substring of Text
		parsed    bool
		toolCalls int
	}{
		{"plain prompt", client.SampleRequest{Prompt: "Name three primary colours."}, client.StopEndTurn, "Name three primary colours.", false, 0},
		{"plain messages", client.SampleRequest{SystemPrompt: "Be terse.", Messages: []client.Message{
			client.UserMessage(client.TextContent("What is the capital of France?")),
		}}, client.StopEndTurn, "capital of France", false, 0},
		{"schema", client.SampleRequest{Prompt: "a person", Schema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"},
		}}, client.StopEndTurn, `"name"`, true, 0},
		{"tools", client.SampleRequest{Prompt: "What's the weather in Paris?", Tools: []client.Tool{{
			Name: "get_weather", Description: "Get the weather of a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}}, ToolChoice: &client.ToolChoice{Mode: client.ToolChoiceRequired}}, client.StopToolUse, "", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Sample(ctx, &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Provider != "offline" || res.Model != "default" || res.Role != client.RoleAssistant || res.Attempts != 1 {
				t.Errorf("provider %q model %q role %q attempts %d", res.Provider, res.Model, res.Role, res.Attempts)
			}
			if res.StopReason != tt.wantStop || !strings.Contains(res.Text, tt.wantText) {
				t.Errorf("stop %q text %q, want %q and a text holding %q", res.StopReason, res.Text, tt.wantStop, tt.wantText)
			}
			if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v", res.Usage)
			}
			if got := res.Parsed != nil && string(res.Parsed) != "null"; got != tt.parsed || res.ParseError != nil {
				t.Errorf("parsed %s, parseError %+v", res.Parsed, res.ParseError)
			}
			if len(res.ToolCalls) != tt.toolCalls {
				t.Fatalf("tool calls %+v", res.ToolCalls)
			}
			if tt.toolCalls > 0 {
				tc := res.ToolCalls[0]
				var args struct{ City string }
				if err := json.Unmarshal(tc.Arguments, &args); err != nil || tc.Name != "get_weather" || args.City == "" || tc.ID == "" {
					t.Errorf("tool call %+v: %v", tc, err)
				}
				want := client.Content{Type: client.BlockToolUse, ID: tc.ID, Name: tc.Name, Input: tc.Arguments}
				if diff := cmp.Diff([]client.Content{want}, res.Content); diff != "" {
					t.Errorf("content (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// person is a value a test asks for.
type person struct {
	Name string `json:"name" jsonschema:"the person's name"`
	Age  int    `json:"age"`
	// Languages are the languages the person speaks.
	Languages []string `json:"languages,omitempty"`
}

func TestSampleSchemaDerivesTheSchemaFromT(t *testing.T) {
	var rec recorder
	srv := service(t, rec.wrap)
	c := mustClient(t, srv.URL)
	for _, model := range []string{"offline/default", "offline/flaky"} {
		t.Run(model, func(t *testing.T) {
			req := &client.SampleRequest{Prompt: "a person", Model: model}
			res, err := client.SampleSchema[person](context.Background(), c, req)
			if err != nil {
				t.Fatal(err)
			}
			if req.Schema != nil {
				t.Error("the caller's request was modified")
			}
			wantAttempts := map[string]int{"offline/default": 1, "offline/flaky": 2}[model]
			if res.Attempts != wantAttempts {
				t.Errorf("attempts = %d, want %d", res.Attempts, wantAttempts)
			}
			var fromJSON person
			if err := json.Unmarshal(res.Result.Parsed, &fromJSON); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fromJSON, res.Parsed); diff != "" || res.Parsed.Name == "" {
				t.Errorf("Parsed (-json +typed):\n%s", diff)
			}
		})
	}
	// What went on the wire is jsonschema.For's schema of person.
	want, err := jsonschema.For[person](nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := rec.all()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var body struct{ Schema map[string]any }
	if err := json.Unmarshal([]byte(reqs[0].Body), &body); err != nil {
		t.Fatal(err)
	}
	if reqs[0].Path != "/v1/sample/schema" {
		t.Errorf("path %s", reqs[0].Path)
	}
	var wantMap map[string]any
	b, _ := json.Marshal(want)
	if err := json.Unmarshal(b, &wantMap); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantMap, body.Schema); diff != "" {
		t.Errorf("schema sent (-want +got):\n%s", diff)
	}
}

func TestSampleSchemaExplicitSchema(t *testing.T) {
	c := newClient(t)
	type move struct {
		Cell int `json:"cell"`
	}
	free := []int{2, 5, 9}
	req := &client.SampleRequest{Prompt: "your move", Model: "offline/flaky", Schema: map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"cell": map[string]any{"type": "integer", "enum": free}},
		"required":             []string{"cell"},
		"additionalProperties": false,
	}}
	res, err := client.SampleSchema[move](context.Background(), c, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(free, res.Parsed.Cell) || res.Attempts != 2 {
		t.Errorf("cell %d after %d attempts, want one of %v after 2", res.Parsed.Cell, res.Attempts, free)
	}
}

func TestSampleSchemaValueThatDoesNotFitT(t *testing.T) {
	c := newClient(t)
	req := &client.SampleRequest{Prompt: "a word", Schema: map[string]any{"type": "string"}}
	_, err := client.SampleSchema[int](context.Background(), c, req)
	var p *client.Problem
	if err == nil || errors.As(err, &p) || !strings.Contains(err.Error(), "decode") {
		t.Fatalf("err = %v, want a decoding error", err)
	}
}

// strategy holds the arguments of both tools of TestSampleTools.
type strategy struct {
	Reasoning string `json:"reasoning,omitempty"`
	Threat    string `json:"threat,omitempty"`
}

func TestSampleTools(t *testing.T) {
	var rec recorder
	srv := service(t, rec.wrap)
	c := mustClient(t, srv.URL)
	type offensive struct {
		Reasoning string `json:"reasoning" jsonschema:"why attacking is best"`
	}
	type defensive struct {
		Threat string `json:"threat" jsonschema:"the line to block"`
	}
	attack, err := client.ToolFor[offensive]("play_offensive", "Attack: build a line of your own")
	if err != nil {
		t.Fatal(err)
	}
	defend, err := client.ToolFor[defensive]("play_defensive", "Defend: block the opponent's line")
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"offline/default", "offline/flaky"} {
		t.Run(model, func(t *testing.T) {
			req := &client.SampleRequest{Prompt: "Block the threat on the diagonal: defend!", Model: model, Tools: []client.Tool{attack, defend}}
			res, err := client.SampleTools[strategy](context.Background(), c, req)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"offline/default": 1, "offline/flaky": 2}[model]
			if res.Attempts != want || len(res.ToolCalls) != 1 {
				t.Fatalf("attempts %d, calls %+v", res.Attempts, res.ToolCalls)
			}
			call := res.ToolCalls[0]
			if call.Name != "play_defensive" || call.Arguments.Threat == "" || call.Arguments.Reasoning != "" {
				t.Errorf("call %+v", call)
			}
			if call.ID != res.Result.ToolCalls[0].ID {
				t.Errorf("ids %q and %q", call.ID, res.Result.ToolCalls[0].ID)
			}
		})
	}
	// The tools went out with the schemas ToolFor derived; a tool without
	// one gets the schema of the type parameter.
	req := &client.SampleRequest{Prompt: "go", Tools: []client.Tool{{Name: "go"}}}
	res, err := client.SampleTools[offensive](context.Background(), c, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ToolCalls[0].Arguments.Reasoning == "" || req.Tools[0].InputSchema != nil {
		t.Errorf("call %+v; the request's tool %+v", res.ToolCalls[0], req.Tools[0])
	}
	reqs := rec.all()
	var body struct {
		Tools []struct {
			Name        string
			InputSchema map[string]any
		}
	}
	if err := json.Unmarshal([]byte(reqs[len(reqs)-1].Body), &body); err != nil {
		t.Fatal(err)
	}
	wantSchema := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"reasoning": map[string]any{"type": "string", "description": "why attacking is best"}},
		"required":             []any{"reasoning"},
		"additionalProperties": false,
	}
	if diff := cmp.Diff(wantSchema, body.Tools[0].InputSchema); diff != "" {
		t.Errorf("schema sent (-want +got):\n%s", diff)
	}
}

func TestExhaustion(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	retries := 1
	tests := []struct {
		name   string
		call   func() error
		method string
		tries  int
	}{
		{"schema", func() error {
			_, err := client.SampleSchema[person](ctx, c, &client.SampleRequest{Prompt: "a person", Model: "offline/broken"})
			return err
		}, "sampleSchema", 3},
		{"schema, one retry", func() error {
			_, err := client.SampleSchema[person](ctx, c, &client.SampleRequest{Prompt: "a person", Model: "offline/broken", Retries: &retries})
			return err
		}, "sampleSchema", 2},
		{"tools", func() error {
			_, err := client.SampleTools[strategy](ctx, c, &client.SampleRequest{Prompt: "play", Model: "offline/broken",
				Tools: []client.Tool{{Name: "play_offensive"}}})
			return err
		}, "sampleTools", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ve *client.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v (%T), want a *client.ValidationError", err, err)
			}
			if ve.Method != tt.method || ve.Attempts != tt.tries || len(ve.Errors) == 0 {
				t.Errorf("method %q attempts %d errors %+v", ve.Method, ve.Attempts, ve.Errors)
			}
			if ve.LastResult == nil || ve.LastResult.Provider != "offline" || ve.LastResult.Model != "broken" || ve.LastResult.Attempts != tt.tries {
				t.Errorf("last result %+v", ve.LastResult)
			}
			var p *client.Problem
			if !errors.As(err, &p) || p.Status != http.StatusUnprocessableEntity || !strings.HasSuffix(p.Type, "/sample-validation-error") {
				t.Errorf("problem %+v", p)
			}
			if !strings.Contains(err.Error(), tt.method) || !strings.Contains(err.Error(), ve.Errors[0].Message) {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	retries := 1
	tests := []struct {
		name     string
		call     func() error
		status   int
		typ      string
		path     string // of the first field error, if any
		extCode  string // the code extension member, if any
		instance string
	}{
		{"unknown model", func() error {
			_, err := c.Sample(ctx, &client.SampleRequest{Prompt: "hi", Model: "nope/none"})
			return err
		}, 400, "invalid-request", "/model", "", "/v1/sample"},
		{"schema and tools", func() error {
			_, err := c.Sample(ctx, &client.SampleRequest{Prompt: "hi", Schema: map[string]any{"type": "string"}, Tools: []client.Tool{{Name: "x"}}})
			return err
		}, 400, "invalid-request", "/tools", "", "/v1/sample"},
		{"retries on sample", func() error {
			_, err := c.Sample(ctx, &client.SampleRequest{Prompt: "hi", Retries: &retries})
			return err
		}, 400, "invalid-request", "/retries", "", "/v1/sample"},
		{"messages without maxTokens", func() error {
			_, err := c.Messages(ctx, &client.CreateMessageParams{Messages: []client.Message{client.UserMessage(client.TextContent("hi"))}})
			return err
		}, 400, "invalid-request", "/maxTokens", "-32602", "/v1/messages"},
		{"unknown loop", func() error {
			_, err := c.Loop(ctx, "loop_0000000000000000")
			return err
		}, 404, "loop-not-found", "", "", "/v1/loops/loop_0000000000000000"},
		{"cancel unknown loop", func() error {
			return c.CancelLoop(ctx, "loop_0000000000000000")
		}, 404, "loop-not-found", "", "", "/v1/loops/loop_0000000000000000"},
		{"bad loop request", func() error {
			_, err := c.StartLoop(ctx, &client.LoopRequest{Prompt: "hi", MaxIterations: 1000})
			return err
		}, 400, "invalid-request", "/maxIterations", "", "/v1/loops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var p *client.Problem
			if !errors.As(err, &p) {
				t.Fatalf("err = %v (%T), want a *client.Problem", err, err)
			}
			var ve *client.ValidationError
			if errors.As(err, &ve) {
				t.Errorf("a %d is not a validation error", p.Status)
			}
			if p.Status != tt.status || p.Type != "https://sampled.dev/problems/"+tt.typ || p.Title == "" || p.Detail == "" || p.Instance != tt.instance {
				t.Errorf("problem %+v", p)
			}
			if tt.path != "" && (len(p.Errors) == 0 || p.Errors[0].Path != tt.path) {
				t.Errorf("errors %+v, want one at %s", p.Errors, tt.path)
			}
			if got := string(p.Extensions["code"]); got != tt.extCode {
				t.Errorf("code %q, want %q", got, tt.extCode)
			}
			if !strings.Contains(err.Error(), p.Detail) {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	res, err := c.Messages(ctx, &client.CreateMessageParams{
		Messages:  []client.Message{client.UserMessage(client.TextContent("What is the capital of France?"))},
		MaxTokens: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Role != client.RoleAssistant || res.Model != "default" || res.StopReason != client.StopEndTurn ||
		len(res.Content) != 1 || !strings.Contains(res.Text(), "capital of France") {
		t.Errorf("result %+v", res)
	}

	// A tool round: the model calls the tool, the result goes back, the
	// model answers in text.
	weather := client.Tool{Name: "get_weather", Description: "Get the weather of a city",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}
	params := &client.CreateMessageParams{
		Messages:   []client.Message{client.UserMessage(client.TextContent("What's the weather in Paris?"))},
		MaxTokens:  100,
		Tools:      []client.Tool{weather},
		ToolChoice: &client.ToolChoice{Mode: client.ToolChoiceTool, Name: "get_weather"},
	}
	res, err = c.Messages(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != client.StopToolUse || len(res.Content) != 1 || res.Content[0].Type != client.BlockToolUse {
		t.Fatalf("result %+v", res)
	}
	use := res.Content[0]
	params.ToolChoice = nil
	params.Messages = append(params.Messages,
		client.Message{Role: res.Role, Content: res.Content},
		client.UserMessage(client.Content{Type: client.BlockToolResult, ToolUseID: use.ID,
			Content: []client.Content{client.TextContent("18°C and sunny")}}))
	res, err = c.Messages(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != client.StopEndTurn || !strings.Contains(res.Text(), "18°C and sunny") {
		t.Errorf("result %+v", res)
	}
}

func TestHeaders(t *testing.T) {
	var rec recorder
	srv := service(t, func(h http.Handler) http.Handler {
		// The service behind a proxy, under a path.
		return rec.wrap(http.StripPrefix("/sampled", h))
	})
	ctx := context.Background()
	tests := []struct {
		name      string
		opts      []client.Option
		wantAuth  string
		wantAgent string
	}{
		{"defaults", nil, "", client.DefaultUserAgent},
		{"key and agent", []client.Option{client.WithAPIKey("sk-test-123"), client.WithUserAgent("play_ttt/1")}, "Bearer sk-test-123", "play_ttt/1"},
		{"http client", []client.Option{client.WithHTTPClient(srv.Client())}, "", client.DefaultUserAgent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustClient(t, srv.URL+"/sampled/", tt.opts...)
			if _, err := c.Sample(ctx, &client.SampleRequest{Prompt: "hi"}); err != nil {
				t.Fatal(err)
			}
			reqs := rec.all()
			r := reqs[len(reqs)-1]
			if r.Path != "/sampled/v1/sample" || r.Header.Get("Authorization") != tt.wantAuth ||
				r.Header.Get("User-Agent") != tt.wantAgent || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("path %s, headers %v", r.Path, r.Header)
			}
		})
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://host", "http://", "http://[::1"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

// TestOtherErrorAnswers: answers of a proxy or of an upstream-facing
// failure, as the client meets them.
func TestOtherErrorAnswers(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		status      int
		retryAfter  string
		body        string
		want        client.Problem
	}{
		{"a proxy's page", "text/html", 502, "", "<html>bad gateway</html>",
			client.Problem{Type: "about:blank", Title: "Bad Gateway", Status: 502}},
		{"rate limited upstream", "application/problem+json", 503, "12",
			`{"type":"https://sampled.dev/problems/upstream-unavailable","title":"Upstream provider unavailable","status":503,"detail":"upstream openai: status 429: rate limited","instance":"/v1/sample","provider":"openai","upstreamStatus":429}`,
			client.Problem{Type: "https://sampled.dev/problems/upstream-unavailable", Title: "Upstream provider unavailable", Status: 503,
				Detail: "upstream openai: status 429: rate limited", Instance: "/v1/sample", RetryAfter: 12 * time.Second,
				Extensions: map[string]json.RawMessage{"provider": json.RawMessage(`"openai"`), "upstreamStatus": json.RawMessage(`429`)}}},
		{"a problem without members", "application/problem+json", 500, "", `{}`,
			client.Problem{Type: "about:blank", Title: "Internal Server Error", Status: 500}},
		{"not JSON", "application/json", 504, "", `{"type":`,
			client.Problem{Type: "about:blank", Title: "Gateway Timeout", Status: 504}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c := mustClient(t, srv.URL, client.WithAPIKey("sk-secret-key"))
			_, err := c.Sample(context.Background(), &client.SampleRequest{Prompt: "hi"})
			var p *client.Problem
			if !errors.As(err, &p) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if diff := cmp.Diff(tt.want, *p); diff != "" {
				t.Errorf("problem (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), "sk-secret-key") {
				t.Errorf("the key shows in %q", err)
			}
		})
	}
}
