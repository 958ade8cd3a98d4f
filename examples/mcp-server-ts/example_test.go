// Package mcpserverts_test proves the migration of examples/mcp-server-ts:
// an MCP server on the official TypeScript SDK whose tool sampled through
// its client (before.mjs) and samples through sampled (after.mjs).
package mcpserverts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
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

// recorded is a request sampled answered.
type recorded struct {
	method, path string
	status       int
}

// recorder notes each request and its status.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.Path, sw.status})
		rec.mu.Unlock()
	})
}

func (rec *recorder) list() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.reqs)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// startSampled serves sampled in-process with offline/flaky as its
// default model, whose first answer to a schema is broken JSON: a tool
// that parsed the model's text itself would fail on it.
func startSampled(t *testing.T) (string, *recorder) {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "sampled.yaml")
	if err := os.WriteFile(cfgFile, []byte("default: offline/flaky\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(func(k string) string {
		if k == "SAMPLED_CONFIG" {
			return cfgFile
		}
		return ""
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), app.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(a.Handler))
	t.Cleanup(func() {
		a.Drain()
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("closing the app: %v", err)
		}
	})
	return srv.URL, rec
}

// checkOutput is what check.mjs prints.
type checkOutput struct {
	Tools []struct {
		Name         string
		OutputSchema map[string]any
	}
	Result *struct {
		IsError           bool
		StructuredContent map[string]any
		Text              string
	}
	Error  string
	Stderr string
}

// runCheck calls describe_city of script from the TypeScript SDK's Client
// (check.mjs), with SAMPLED_URL set to url.
func runCheck(t *testing.T, ctx context.Context, node, url, script string) checkOutput {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, "check.mjs", script)
	cmd.Env = append(os.Environ(), "SAMPLED_URL="+url)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node check.mjs %s: %v\n--- stdout\n%s\n--- stderr\n%s", script, err, stdout.String(), stderr.String())
	}
	var out checkOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("check.mjs %s printed %v: %s", script, err, stdout.String())
	}
	return out
}

// TestMigration starts sampled and calls describe_city of both servers
// from the official TypeScript client, which declares no sampling
// capability: after.mjs answers with a structured value valid for its
// output schema, obtained through POST /v1/sample/schema after offline/
// flaky's broken first attempt was corrected; before.mjs cannot sample
// through such a client and answers an error, without reaching sampled.
func TestMigration(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node is not installed; the MCP server example needs node 20 or later")
	}
	for _, m := range []string{"@modelcontextprotocol/sdk", "@sampled/client/dist/index.js", "zod"} {
		if _, err := os.Stat(filepath.Join("node_modules", m)); err != nil {
			need(t, "node_modules/%s is missing: run npm ci --prefix examples/mcp-server-ts", m)
		}
	}
	url, rec := startSampled(t)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()

	after := runCheck(t, ctx, node, url, "after.mjs")
	if after.Error != "" || after.Result == nil || after.Result.IsError {
		t.Fatalf("after.mjs: error %q, result %+v\n%s", after.Error, after.Result, after.Stderr)
	}
	if len(after.Tools) != 1 || after.Tools[0].Name != "describe_city" || after.Tools[0].OutputSchema == nil {
		t.Errorf("after.mjs lists %+v; want describe_city with its output schema", after.Tools)
	}
	sc := after.Result.StructuredContent
	city, _ := sc["city"].(string)
	_, cok := sc["country"].(string)
	pop, pok := sc["population"].(float64)
	landmarks, lok := sc["landmarks"].([]any)
	if city == "" || !cok || !pok || pop < 0 || pop != float64(int64(pop)) || !lok {
		t.Errorf("structuredContent %v does not fit City", sc)
	}
	for _, l := range landmarks {
		if _, ok := l.(string); !ok {
			t.Errorf("landmark %v is not a string", l)
		}
	}
	var text map[string]any
	if err := json.Unmarshal([]byte(after.Result.Text), &text); err != nil || fmt.Sprint(text) != fmt.Sprint(sc) {
		t.Errorf("the text content %q is not the structured value %v", after.Result.Text, sc)
	}
	want := []recorded{{"POST", "/v1/sample/schema", 200}}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Errorf("after.mjs made the requests %v; want %v", got, want)
	}
	if n := metric(t, url, `sampled_validation_retries_total{`); n < 1 {
		t.Errorf("sampled_validation_retries_total is %v; want offline/flaky's broken first answer corrected", n)
	}

	before := runCheck(t, ctx, node, url, "before.mjs")
	if before.Result == nil || !before.Result.IsError {
		t.Errorf("before.mjs with a client that cannot sample: result %+v, error %q; want an error result", before.Result, before.Error)
	} else {
		t.Logf("before.mjs, as its callers see it without sampling: %s", before.Result.Text)
	}
	if got := rec.list(); len(got) != 2 || got[1].path != "/metrics" {
		t.Errorf("requests %v: before.mjs reached sampled", got)
	}
}

// metric sums the samples of the series starting with prefix.
func metric(t *testing.T, url, prefix string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			sum += v
		}
	}
	return sum
}

// TestMigrationIsOneLine: after.mjs is before.mjs, past their opening
// comments, with the client's import added and the one line that sampled
// changed.
func TestMigrationIsOneLine(t *testing.T) {
	read := func(name string) []string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for len(lines) > 0 && strings.HasPrefix(lines[0], "//") {
			lines = lines[1:]
		}
		return lines
	}
	removed, added := diff(read("before.mjs"), read("after.mjs"))
	ok := len(removed) == 1 && len(added) == 2 &&
		strings.Contains(removed[0], "await server.server.createMessage(request)") &&
		regexp.MustCompile(`^import \{ sampled \} from "@sampled/client";$`).MatchString(added[0]) &&
		strings.Contains(added[1], "await sampled.sampleSchema(City, request)")
	if !ok {
		t.Errorf("before.mjs → after.mjs removes %q and adds %q; want the import and one changed line", removed, added)
	}
}

// diff returns the lines of a missing from b and of b missing from a, in
// order, by their longest common subsequence.
func diff(a, b []string) (removed, added []string) {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			removed = append(removed, a[i])
			i++
		default:
			added = append(added, b[j])
			j++
		}
	}
	return append(removed, a[i:]...), append(added, b[j:]...)
}
