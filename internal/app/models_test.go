package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBareModelName checks that a request may name a model as its answers
// do, by its bare name ("gpt-4o-mini"), when one provider offers it, and
// that a bare name several providers offer is a 400 naming each of them.
func TestBareModelName(t *testing.T) {
	const reply = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Paris.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16}}`
	var (
		mu       sync.Mutex
		upModels []string
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		upModels = append(upModels, body.Model)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(up.Close)

	const twoOllamas = `
providers:
  - {name: local, type: ollama, endpoint: "http://127.0.0.1:1", models: [{name: llama3.2}]}
  - {name: lab, type: ollama, endpoint: "http://127.0.0.1:2", models: [{name: llama3.2}, {name: qwen3}]}
`
	tests := []struct {
		name       string
		env        map[string]string
		body       string
		wantStatus int
		// want holds the members of the answer compared.
		want map[string]any
	}{
		{
			name:       "bare name of the configured provider",
			env:        map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": up.URL + "/v1", "SAMPLING_MODEL": "gpt-4o-mini"},
			body:       `{"prompt":"Capital of France?","model":"gpt-4o-mini"}`,
			wantStatus: http.StatusOK,
			want:       map[string]any{"model": "gpt-4o-mini", "provider": "openai"},
		},
		{
			name:       "bare name of the offline provider beside it",
			env:        map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": up.URL + "/v1", "SAMPLING_MODEL": "gpt-4o-mini"},
			body:       `{"prompt":"hi","model":"flaky"}`,
			wantStatus: http.StatusOK,
			want:       map[string]any{"model": "flaky", "provider": "offline"},
		},
		{
			name:       "bare name offered once in a file",
			env:        map[string]string{"SAMPLED_CONFIG": "two.yaml"},
			body:       `{"prompt":"hi","model":"qwen3"}`,
			wantStatus: http.StatusBadGateway, // lab's endpoint does not answer: the model was resolved
			want:       map[string]any{"status": float64(http.StatusBadGateway)},
		},
		{
			name:       "bare name offered twice",
			env:        map[string]string{"SAMPLED_CONFIG": "two.yaml"},
			body:       `{"prompt":"hi","model":"llama3.2"}`,
			wantStatus: http.StatusBadRequest,
			want: map[string]any{"errors": []any{map[string]any{"path": "/model",
				"message": `ambiguous model "llama3.2": offered by local/llama3.2, lab/llama3.2; name one of them`}}},
		},
		{
			name:       "unknown bare name",
			env:        map[string]string{"SAMPLING_PROVIDER": "openai", "SAMPLING_ENDPOINT": up.URL + "/v1", "SAMPLING_MODEL": "gpt-4o-mini"},
			body:       `{"prompt":"hi","model":"gpt-5"}`,
			wantStatus: http.StatusBadRequest,
			want:       map[string]any{"errors": []any{map[string]any{"path": "/model", "message": `unknown model "gpt-5"`}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loadConfig(t, tt.env, twoOllamas)
			a, err := New(context.Background(), Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			req := httptest.NewRequest(http.MethodPost, "/v1/sample", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			a.Handler.ServeHTTP(w, req)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			for k := range got {
				if _, ok := tt.want[k]; !ok {
					delete(got, k)
				}
			}
			if errs, ok := got["errors"].([]any); ok {
				for _, e := range errs {
					if m, ok := e.(map[string]any); ok {
						for k := range m {
							if k != "path" && k != "message" {
								delete(m, k)
							}
						}
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"gpt-4o-mini"}, upModels); diff != "" {
		t.Errorf("models sent upstream (-want +got):\n%s", diff)
	}
}
