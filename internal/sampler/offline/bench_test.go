package offline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sampled/sampled/internal/sampler"
)

// benchSchema is the three-property schema of the service benchmarks.
const benchSchema = `{"type":"object","properties":{"city":{"type":"string"},"population":{"type":"integer","minimum":0},"tags":{"type":"array","items":{"type":"string"}}},"required":["city","population"]}`

func BenchmarkSchema(b *testing.B) {
	p := New(nil)
	req := &sampler.Request{Model: "default", Schema: json.RawMessage(benchSchema),
		Messages: []sampler.Message{userText("Describe Paris")}}
	for b.Loop() {
		if _, err := p.Sample(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTools(b *testing.B) {
	p := New(nil)
	req := &sampler.Request{Model: "default", Tools: testTools(),
		Messages: []sampler.Message{userText("What's the weather in Paris?")}}
	for b.Loop() {
		if _, err := p.Sample(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCorpus answers every schema of the corpus once per iteration.
func BenchmarkCorpus(b *testing.B) {
	files, err := filepath.Glob(filepath.Join("testdata", "schemas", "*.json"))
	if err != nil {
		b.Fatal(err)
	}
	var reqs []*sampler.Request
	for _, f := range files {
		schema, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, &sampler.Request{Model: "default", Schema: schema, Messages: []sampler.Message{userText(corpusPrompt)}})
	}
	p := New(nil)
	for b.Loop() {
		for _, req := range reqs {
			if _, err := p.Sample(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	}
}
