// Package typescript_test runs the TypeScript client's node suites
// (test/*.test.mjs) against an in-process sampled, and checks that the
// client's generated types and its committed dist/ are current.
package typescript_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
)

// The keys of the service the suites run against: key may do everything,
// limitedKey one request a minute, so that its second request is a 429.
const (
	key        = "ts-client-key"
	limitedKey = "ts-client-limited-key"
)

// need skips the test with a message naming what is missing, or fails it
// when CI=true: CI must run it.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// nodeAnd returns the path of node, once it and the client's node_modules
// (npm ci --prefix clients/typescript) are there.
func nodeAnd(t *testing.T, modules ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node is not installed; the TypeScript client's tests need node 20 or later")
	}
	for _, m := range modules {
		if _, err := os.Stat(m); err != nil {
			need(t, "%s is missing: run npm ci --prefix clients/typescript (and npm ci --prefix api/check)", m)
		}
	}
	return node
}

// command runs node with args in dir, bounded by ctx, and fails the test
// with both outputs when it fails.
func command(t *testing.T, ctx context.Context, env []string, dir, node string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n--- stdout\n%s\n--- stderr\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// startSampled serves sampled (offline provider) in-process with two API
// keys, until the test ends.
func startSampled(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	hash := func(k string) string {
		s := sha256.Sum256([]byte(k))
		return "sha256:" + hex.EncodeToString(s[:])
	}
	cfgFile := filepath.Join(dir, "sampled.yaml")
	cfgText := fmt.Sprintf("apiKeys:\n  - name: main\n    hash: %s\n    requestsPerMinute: 100000\n    concurrentLoops: 100\n  - name: limited\n    hash: %s\n    requestsPerMinute: 1\n",
		hash(key), hash(limitedKey))
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SAMPLED_CONFIG": cfgFile}
	cfg, err := config.Load(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), app.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		a.Drain()
		srv.CloseClientConnections()
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("closing the app: %v", err)
		}
	})
	return srv.URL
}

// cuttingProxy forwards every request to upstream. The first connection
// to a loop's event stream (no Last-Event-ID) is cut in the middle of the
// stream's fourth event, as soon as that event has arrived (while the run
// goes on, if it still runs): the client has three whole events and part
// of the fourth, and must resume after event 3. GET
// /_proxy/seen?loop=ID lists the Last-Event-ID of each connection to that
// loop's stream ("" for none), in order.
func cuttingProxy(t *testing.T, upstream string) string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string][]string{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_proxy/seen" {
			mu.Lock()
			list := slices.Clone(seen[r.URL.Query().Get("loop")])
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(append([]string{}, list...))
			return
		}
		events := strings.HasPrefix(r.URL.Path, "/v1/loops/") && strings.HasSuffix(r.URL.Path, "/events")
		lastID := r.Header.Get("Last-Event-ID")
		if events {
			loop := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/loops/"), "/events")
			mu.Lock()
			seen[loop] = append(seen[loop], lastID)
			mu.Unlock()
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if !events || lastID != "" || resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(flushWriter{w}, resp.Body)
			return
		}
		// Pass the stream through event by event (sampled ends each with a
		// blank line); of the fourth event, half; then the connection dies.
		var buf []byte
		chunk := make([]byte, 4096)
		for n := 0; ; {
			end := bytes.Index(buf, []byte("\n\n"))
			if end < 0 {
				k, err := resp.Body.Read(chunk)
				buf = append(buf, chunk[:k]...)
				if err != nil {
					_, _ = w.Write(buf)
					return // the stream ended before a fourth event
				}
				continue
			}
			event := buf[:end+2]
			buf = buf[end+2:]
			if bytes.HasPrefix(event, []byte(":")) {
				continue // a heartbeat
			}
			if n++; n == 4 {
				_, _ = w.Write(event[:len(event)/2])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
			_, _ = flushWriter{w}.Write(event)
		}
	})
	// net/http closes the connection of a handler that panics with
	// http.ErrAbortHandler, and logs nothing.
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// flushWriter flushes after every write, so that streams pass at once.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.w.(http.Flusher).Flush()
	return n, err
}

// TestNodeSuites runs node --test on test/*.test.mjs against a sampled
// started here (BASE_URL), with the API keys of startSampled and the
// cutting proxy (PROXY_URL): every client function, the typed errors, the
// resumption of a loop's events after a cut connection, and aborts.
func TestNodeSuites(t *testing.T) {
	node := nodeAnd(t, filepath.Join("node_modules", "@modelcontextprotocol", "sdk"), filepath.Join("node_modules", "zod"))
	base := startSampled(t)
	proxy := cuttingProxy(t, base)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	files, err := filepath.Glob(filepath.Join("test", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test/*.test.mjs: %v", err)
	}
	env := []string{"BASE_URL=" + base, "PROXY_URL=" + proxy, "API_KEY=" + key, "LIMITED_KEY=" + limitedKey,
		"SAMPLED_URL=" + base, "SAMPLED_API_KEY=" + key}
	out := command(t, ctx, env, ".", node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	t.Logf("node --test:\n%s", summary(out))
}

// summary keeps the spec reporter's totals.
func summary(out []byte) string {
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "ℹ ") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestTypesCheck type-checks test/types.ts, uses of the client as a
// TypeScript caller writes them (the MCP SDK's types in and out of
// createMessage, a Zod schema's type in sampleSchema's parsed), against
// the committed dist/ declarations.
func TestTypesCheck(t *testing.T) {
	node := nodeAnd(t, filepath.Join("node_modules", "typescript"), filepath.Join("node_modules", "@modelcontextprotocol", "sdk"))
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	command(t, ctx, nil, ".", node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", filepath.Join("test", "tsconfig.json"))
}

// TestGeneratedTypesCurrent regenerates src/openapi.ts from
// api/openapi.yaml with the openapi-typescript that api/check pins and
// fails when the committed file differs, or when the client pins another
// version of the generator.
func TestGeneratedTypesCurrent(t *testing.T) {
	gen := filepath.Join("..", "..", "api", "check", "node_modules", "openapi-typescript", "bin", "cli.js")
	node := nodeAnd(t, gen)
	pinned := func(file string) string {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ Dependencies, DevDependencies map[string]string }
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if v := p.Dependencies["openapi-typescript"]; v != "" {
			return v
		}
		return p.DevDependencies["openapi-typescript"]
	}
	if a, c := pinned(filepath.Join("..", "..", "api", "check", "package.json")), pinned("package.json"); a != c || a == "" {
		t.Errorf("openapi-typescript: api/check pins %q, clients/typescript %q; pin the same version", a, c)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "openapi.ts")
	command(t, ctx, nil, ".", node, gen, filepath.Join("..", "..", "api", "openapi.yaml"), "-o", out)
	sameFile(t, out, filepath.Join("src", "openapi.ts"), "cd clients/typescript && npm run generate && npm run build")
}

// TestDistCurrent compiles src/ with the pinned TypeScript into a
// temporary directory and fails when the committed dist/ differs from it
// (a file changed, missing or left over).
func TestDistCurrent(t *testing.T) {
	node := nodeAnd(t, filepath.Join("node_modules", "typescript"), filepath.Join("node_modules", "@modelcontextprotocol", "sdk"))
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	out := t.TempDir()
	command(t, ctx, nil, ".", node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json", "--outDir", out)
	want, err := filepath.Glob(filepath.Join(out, "*"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := filepath.Glob(filepath.Join("dist", "*"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) []string {
		var n []string
		for _, p := range paths {
			n = append(n, filepath.Base(p))
		}
		slices.Sort(n)
		return n
	}
	if w, g := names(want), names(got); !slices.Equal(w, g) {
		t.Fatalf("dist/ holds %v, tsc makes %v: run cd clients/typescript && npm run build", g, w)
	}
	for _, p := range want {
		sameFile(t, p, filepath.Join("dist", filepath.Base(p)), "cd clients/typescript && npm run build")
	}
}

// sameFile fails the test when the committed file differs from the one
// just made, saying which command brings it up to date.
func sameFile(t *testing.T, made, committed, fix string) {
	t.Helper()
	a, err := os.ReadFile(made)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(committed)
	if err != nil {
		t.Fatalf("%v: run %s", err, fix)
	}
	if !bytes.Equal(a, b) {
		al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
		i := 0
		for i < len(al) && i < len(bl) && al[i] == bl[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Errorf("%s is stale (first difference at line %d: committed %q, current %q): run %s", committed, i+1, line(bl), line(al), fix)
	}
}

// TestPackageManifest: the package installs as it is from the repository
// (npm install --install-links, a packed tarball): ESM, its exports point
// at committed files of dist/, which npm packs, and it depends on nothing
// at run time (the MCP SDK is a peer, for its types).
func TestPackageManifest(t *testing.T) {
	b, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Type             string
		Exports          map[string]json.RawMessage
		Files            []string
		Scripts          map[string]string
		Dependencies     map[string]string
		PeerDependencies map[string]string
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != "module" {
		t.Errorf("type %q; want module", p.Type)
	}
	if len(p.Dependencies) != 0 {
		t.Errorf("dependencies %v; want none at run time", p.Dependencies)
	}
	if p.PeerDependencies["@modelcontextprotocol/sdk"] == "" {
		t.Errorf("peerDependencies %v; want the MCP SDK, whose types the client takes", p.PeerDependencies)
	}
	for _, s := range []string{"prepare", "preinstall", "install", "postinstall"} {
		if p.Scripts[s] != "" {
			t.Errorf("script %s: installing must need no build", s)
		}
	}
	if !slices.Contains(p.Files, "dist") {
		t.Errorf("files %v; want dist packed", p.Files)
	}
	var dot struct{ Types, Import string }
	if err := json.Unmarshal(p.Exports["."], &dot); err != nil || dot.Types == "" || dot.Import == "" {
		t.Fatalf("exports[\".\"] %s (%v); want types and import", p.Exports["."], err)
	}
	for _, f := range []string{dot.Types, dot.Import} {
		if !strings.HasPrefix(f, "./dist/") {
			t.Errorf("export %s is not in dist/", f)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("export %s: %v", f, err)
		}
	}
}
