package sampler

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func testCatalog(t *testing.T) *Catalog {
	t.Helper()
	c := NewCatalog([]Model{
		{Provider: "openai", Name: "gpt-4o-mini", Aliases: []string{"fast"}, Cost: 0.9, Speed: 0.9, Intelligence: 0.5},
		{Provider: "openai", Name: "gpt-4o", Cost: 0.4, Speed: 0.6, Intelligence: 0.85},
		{Provider: "anthropic", Name: "claude-sonnet-4-5", Aliases: []string{"smart"}, Cost: 0.3, Speed: 0.5, Intelligence: 0.95, Fallbacks: []string{"openai/gpt-4o"}},
		{Provider: "anthropic", Name: "claude-haiku-4-5", Cost: 0.8, Speed: 0.95, Intelligence: 0.6},
		{Provider: "ollama", Name: "llama3.2", Cost: 1, Speed: 0.4, Intelligence: 0.3},
		{Provider: "ollama", Name: "llama3.2:8b", Cost: 1, Speed: 0.3, Intelligence: 0.4},
		{Provider: "vllm", Name: "llama3.2:8b", Cost: 1, Speed: 0.5, Intelligence: 0.4},
		{Provider: "vllm", Name: "fast", Cost: 1, Speed: 0.5, Intelligence: 0.4},
	}, "openai/gpt-4o-mini")
	return c
}

func TestCatalogSelect(t *testing.T) {
	c := testCatalog(t)
	tests := []struct {
		name    string
		spec    string
		prefs   *ModelPreferences
		want    string
		wantErr error
	}{
		{name: "nothing gives the default", want: "openai/gpt-4o-mini"},
		{name: "explicit id", spec: "ollama/llama3.2", want: "ollama/llama3.2"},
		{name: "explicit alias", spec: "smart", want: "anthropic/claude-sonnet-4-5"},
		{name: "explicit wins over hints", spec: "fast", prefs: &ModelPreferences{Hints: []ModelHint{{Name: "claude"}}}, want: "openai/gpt-4o-mini"},
		{name: "unknown explicit", spec: "openai/gpt-5", wantErr: ErrUnknownModel},
		{name: "bare name of one provider", spec: "gpt-4o-mini", want: "openai/gpt-4o-mini"},
		{name: "bare name of another provider", spec: "llama3.2", want: "ollama/llama3.2"},
		{name: "bare name offered twice", spec: "llama3.2:8b", wantErr: ErrAmbiguousModel},
		{name: "unknown bare name", spec: "gpt-5", wantErr: ErrUnknownModel},
		{name: "bare name is not a substring match", spec: "llama", wantErr: ErrUnknownModel},
		{name: "alias wins over a bare name", spec: "fast", want: "openai/gpt-4o-mini"},
		{name: "hint substring", prefs: &ModelPreferences{Hints: []ModelHint{{Name: "sonnet"}}}, want: "anthropic/claude-sonnet-4-5"},
		{name: "first matching hint wins", prefs: &ModelPreferences{Hints: []ModelHint{{Name: "gemini"}, {Name: "llama"}, {Name: "claude"}}}, want: "ollama/llama3.2"},
		{name: "hint is case-insensitive", prefs: &ModelPreferences{Hints: []ModelHint{{Name: "HAIKU"}}}, want: "anthropic/claude-haiku-4-5"},
		{name: "ambiguous hint, first configured without priorities", prefs: &ModelPreferences{Hints: []ModelHint{{Name: "claude"}}}, want: "anthropic/claude-sonnet-4-5"},
		{name: "ambiguous hint, priorities choose", prefs: &ModelPreferences{Hints: []ModelHint{{Name: "claude"}}, SpeedPriority: ptr(1.0)}, want: "anthropic/claude-haiku-4-5"},
		{name: "no hint matches, no priorities: default", prefs: &ModelPreferences{Hints: []ModelHint{{Name: "gemini"}}}, want: "openai/gpt-4o-mini"},
		{name: "intelligence priority", prefs: &ModelPreferences{IntelligencePriority: ptr(0.9)}, want: "anthropic/claude-sonnet-4-5"},
		{name: "cost priority", prefs: &ModelPreferences{CostPriority: ptr(1.0)}, want: "ollama/llama3.2"},
		{name: "weighted mix", prefs: &ModelPreferences{CostPriority: ptr(0.5), SpeedPriority: ptr(0.5), IntelligencePriority: ptr(0.5)}, want: "anthropic/claude-haiku-4-5"},
		{name: "tie goes to the first configured", prefs: &ModelPreferences{CostPriority: ptr(0.0)}, want: "openai/gpt-4o-mini"},
		{name: "empty hint is skipped", prefs: &ModelPreferences{Hints: []ModelHint{{}, {Name: "4o"}}, IntelligencePriority: ptr(1.0)}, want: "openai/gpt-4o"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := c.Select(tt.spec, tt.prefs)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, m.ID()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCatalogAmbiguousNamesCandidates checks that the error of a bare name
// several providers offer names each of them, so that the caller can pick.
func TestCatalogAmbiguousNamesCandidates(t *testing.T) {
	_, err := testCatalog(t).Lookup("llama3.2:8b")
	want := `ambiguous model "llama3.2:8b": offered by ollama/llama3.2:8b, vllm/llama3.2:8b; name one of them`
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
