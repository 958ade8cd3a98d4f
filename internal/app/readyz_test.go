package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/testing/testwait"
)

// readyzServer serves an App built from cfg, both closed with the test.
func readyzServer(t *testing.T, cfg *config.Config) string {
	t.Helper()
	a, err := New(t.Context(), Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	return srv.URL
}

// serverState is what /readyz and /v1/tools say of one MCP server.
type serverState struct {
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	Required  bool   `json:"required"`
	Error     string `json:"error"`
}

// readyzBody is the answer of /readyz: a 200 body or a 503 problem.
type readyzBody struct {
	Status     any           `json:"status"` // "ready", or the problem's 503
	Detail     string        `json:"detail"`
	Degraded   []string      `json:"degraded"`
	MCPServers []serverState `json:"mcpServers"`
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
	return resp.StatusCode
}

// settled waits until no MCP server of the service is still connecting.
func settled(t *testing.T, url string) {
	t.Helper()
	testwait.Poll(t, 10*time.Millisecond, 30*time.Second, "the MCP servers' first connection attempts", func() bool {
		var tl struct {
			Servers []serverState `json:"servers"`
		}
		getJSON(t, url+"/v1/tools", &tl)
		for _, s := range tl.Servers {
			if s.Error == "connecting" {
				return false
			}
		}
		return true
	})
}

// TestReadyzExampleConfig: the example configuration's MCP servers need
// uvx (and a server on port 9000), which a machine may lack. They are not
// required, so the service is ready to sample: /readyz answers 200 and
// names them as degraded, with why; /v1/tools shows them too, and sampling
// works.
func TestReadyzExampleConfig(t *testing.T) {
	env := map[string]string{"SAMPLED_CONFIG": "../../deploy/sampled.example.yaml", "OPENAI_API_KEY": "sk-test"}
	cfg, err := config.Load(func(k string) string { return env[k] }, func(name string) ([]byte, error) {
		if name == "/run/secrets/anthropic_api_key" {
			return []byte("sk-ant-test"), nil
		}
		return os.ReadFile(name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.MCPServers) == 0 {
		t.Fatal("the example configuration has no MCP servers")
	}
	// The example's API key is one nobody knows; this test is not about
	// keys (/readyz is open anyway).
	cfg.APIKeys = nil
	// uvx may be installed here: point the stdio servers at a program that
	// is certainly missing, and the HTTP one at a closed port.
	missing := filepath.Join(t.TempDir(), "uvx")
	for name, s := range cfg.MCPServers {
		if s.Required {
			t.Errorf("mcpServers.%s is required in the example: the service would not be ready without it", name)
		}
		if s.Command != "" {
			s.Command = missing
		} else {
			s.URL = closedHTTPURL(t)
		}
		cfg.MCPServers[name] = s
	}
	url := readyzServer(t, cfg)
	settled(t, url)

	var got readyzBody
	if code := getJSON(t, url+"/readyz", &got); code != http.StatusOK {
		t.Fatalf("/readyz = %d %+v, want 200", code, got)
	}
	var wantDegraded []string
	for _, s := range got.MCPServers {
		if s.Name == "std" {
			if !s.Connected {
				t.Errorf("std: %+v, want connected", s)
			}
			continue
		}
		wantDegraded = append(wantDegraded, s.Name)
		if s.Connected || s.Required || s.Error != "" {
			t.Errorf("%s: %+v, want not connected, not required, and no error (GET /v1/tools says why)", s.Name, s)
		}
	}
	if len(got.MCPServers) != len(cfg.MCPServers)+1 {
		t.Errorf("/readyz shows %d servers, want the %d configured and std", len(got.MCPServers), len(cfg.MCPServers))
	}
	if diff := cmp.Diff(wantDegraded, got.Degraded); diff != "" || got.Status != "ready" {
		t.Errorf("status %v, degraded (-want +got):\n%s", got.Status, diff)
	}

	var tl struct {
		Servers []serverState `json:"servers"`
	}
	getJSON(t, url+"/v1/tools", &tl)
	for i, s := range tl.Servers {
		if s.Name != "std" && s.Error == "" {
			t.Errorf("/v1/tools: %s has no error", s.Name)
		}
		tl.Servers[i].Error = ""
	}
	if diff := cmp.Diff(got.MCPServers, tl.Servers); diff != "" {
		t.Errorf("/v1/tools servers differ from /readyz's (-readyz +tools):\n%s", diff)
	}

	// Sampling works: the offline provider is always there.
	resp, err := http.Post(url+"/v1/sample", "application/json", strings.NewReader(`{"prompt":"hi","model":"offline/default"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("sample = %d, want 200", resp.StatusCode)
	}
}

// TestReadyzRequiredServer: a server marked required: true that is not
// connected makes /readyz answer 503, naming it; a server that is not
// required, down as well, does not.
func TestReadyzRequiredServer(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing-mcp-server")
	yaml := "mcpServers:\n" +
		"  git: {command: " + missing + ", required: true}\n" +
		"  fetch: {command: " + missing + "}\n"
	cfg := loadConfig(t, map[string]string{"SAMPLED_CONFIG": "sampled.yaml"}, yaml)
	url := readyzServer(t, cfg)
	settled(t, url)

	var got readyzBody
	if code := getJSON(t, url+"/readyz", &got); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d %+v, want 503", code, got)
	}
	// The server is named, without its connection error (the missing
	// program's path): /readyz is open without a key.
	if !strings.HasSuffix(got.Detail, "not connected: git") || strings.Contains(got.Detail, "fetch") {
		t.Errorf("detail %q, want git named without its error, and fetch not", got.Detail)
	}
	want := []serverState{{Name: "fetch"}, {Name: "git", Required: true}, {Name: "std", Connected: true}}
	if diff := cmp.Diff(want, got.MCPServers); diff != "" {
		t.Errorf("mcpServers of the problem (-want +got):\n%s", diff)
	}
}

// closedHTTPURL returns the URL of a port nothing listens on.
func closedHTTPURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/mcp"
	srv.Close()
	return url
}
