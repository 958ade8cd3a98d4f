package config

import (
	"io/fs"
	"os"
	"strings"
	"testing"
)

// fuzzSecret is every API key the fuzzed configurations can reach, from
// the environment or from a file; no error may hold it.
const fuzzSecret = "sk-fuzz-secret-0123456789"

// FuzzLoad reads configuration files. Load either refuses a file or returns
// a configuration that passes its own checks, whose keys are resolved;
// errors never hold a key and do not weigh more than escaping makes of the
// file.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("../../deploy/sampled.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(goodYAML))
	f.Add([]byte("providers:\n  - name: local\n    type: ollama\n    models: [{name: m, fallbacks: [offline/default]}]\nmcpServers:\n  fs: {command: npx, args: [-y, x], env: {A: b}}\n  web: {url: 'http://127.0.0.1:1/mcp', headers: {X: y}}\n"))
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nproviders: *c\n"))
	f.Add([]byte("requestTimeout: -1s\n"))
	getenv := func(k string) string {
		switch k {
		case "SAMPLED_CONFIG":
			return "fuzz.yaml"
		case "OPENAI_API_KEY", "KEY":
			return fuzzSecret
		}
		return ""
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		readFile := func(name string) ([]byte, error) {
			switch {
			case name == "fuzz.yaml":
				return in, nil
			case strings.HasPrefix(name, "/run/secrets/"):
				return []byte(fuzzSecret + "\n"), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		c, err := Load(getenv, readFile)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, fuzzSecret) || len(msg) > 6*len(in)+512 {
				t.Fatalf("error holds the key or is too long (%d bytes): %.500q", len(msg), msg)
			}
			return
		}
		if err := c.check(); err != nil {
			t.Fatalf("Load accepted a configuration its check refuses: %v", err)
		}
		for i, p := range c.Providers {
			if (p.APIKeyEnv != "" || p.APIKeyFile != "") && p.APIKey.Reveal() != fuzzSecret {
				t.Fatalf("providers[%d]: key not resolved", i)
			}
		}
		if c.Server.Addr == "" || (c.Server.LogFormat != "json" && c.Server.LogFormat != "text") {
			t.Fatalf("server settings without defaults: %+v", c.Server)
		}
	})
}
