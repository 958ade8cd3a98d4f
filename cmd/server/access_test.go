package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/testing/testlog"
)

// TestDefaultAddrIsLoopback: without SAMPLED_ADDR or -addr the service
// listens on loopback only.
func TestDefaultAddrIsLoopback(t *testing.T) {
	c, err := readConfig([]string{"sampled"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Addr != "127.0.0.1:8080" {
		t.Errorf("default address %q, want 127.0.0.1:8080", c.Server.Addr)
	}
}

// runWith runs the service with env until the test ends, and returns its
// address and its log.
func runWith(t *testing.T, env map[string]string) (string, *testlog.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncWriter{lines: make(chan string, 16)}
	logs := &testlog.Buffer{}
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, []string{"sampled"}, func(k string) string { return env[k] }, out, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	select {
	case line := <-out.lines:
		return strings.TrimPrefix(line, "listening on "), logs
	case err := <-errc:
		errc <- err
		t.Fatalf("run: %v", err)
	}
	return "", logs
}

// TestWarnsWithoutKeysBeyondLoopback: listening on every interface without
// API keys logs a warning at start; on loopback, or with keys, it does not.
func TestWarnsWithoutKeysBeyondLoopback(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	cfgFile := filepath.Join(t.TempDir(), "sampled.yaml")
	if err := os.WriteFile(keyFile, []byte("s3cret-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte("apiKeys:\n  - name: ci\n    keyFile: "+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		warn bool
	}{
		{"every interface, no keys", map[string]string{"SAMPLED_ADDR": ":0"}, true},
		{"loopback, no keys", map[string]string{"SAMPLED_ADDR": "127.0.0.1:0"}, false},
		{"every interface, keys", map[string]string{"SAMPLED_ADDR": ":0", "SAMPLED_CONFIG": cfgFile}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, logs := runWith(t, tt.env)
			// The warning is logged before the server accepts: once a
			// request is answered, it is in the log.
			resp, err := http.Get("http://" + strings.Replace(addr, "[::]", "127.0.0.1", 1) + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var warned bool
			for line := range strings.Lines(logs.String()) {
				var rec struct{ Level, Msg string }
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "WARN" && strings.Contains(rec.Msg, "without API keys") {
					warned = true
				}
			}
			if warned != tt.warn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tt.warn, logs.String())
			}
			if strings.Contains(logs.String(), "s3cret-key") {
				t.Errorf("the log holds the key:\n%s", logs.String())
			}
		})
	}
}

// TestKeysEndToEnd: with a key configured the service answers 401 without
// it and 200 with it; health stays open.
func TestKeysEndToEnd(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "sampled.yaml")
	// printf %s s3cret-key | sha256sum
	const hash = "sha256:817b823905cc7853f381992575a9041fcdb17fc70e776707abfb4d7c59ecbf3f"
	if err := os.WriteFile(cfgFile, []byte("apiKeys:\n  - name: ci\n    hash: "+hash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := runWith(t, map[string]string{"SAMPLED_ADDR": "127.0.0.1:0", "SAMPLED_CONFIG": cfgFile})
	for _, c := range []struct {
		path, key string
		want      int
	}{{"/v1/models", "", 401}, {"/v1/models", "wrong", 401}, {"/v1/models", "s3cret-key", 200}, {"/healthz", "", 200}} {
		req, _ := http.NewRequest("GET", "http://"+addr+c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s with key %q: %d, want %d", c.path, c.key, resp.StatusCode, c.want)
		}
	}
}
