package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/console"
)

// TestHandlerServesFiles: the page at /console, each file at
// /console/{name} with its type, and a 404 problem for anything else;
// every answer with the console's Content-Security-Policy.
func TestHandlerServesFiles(t *testing.T) {
	// The service's own 404 (handlers' problem writer), as routes.go
	// passes it.
	h := console.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"status":404,"title":"Not found"}`)
	}))
	get := func(path string) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Result()
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
		".html": "text/html; charset=utf-8", ".svg": "image/svg+xml"}
	paths := map[string]string{console.Prefix: "text/html; charset=utf-8"}
	files, err := os.ReadDir("static") // what the binary embeds
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		paths[console.Prefix+"/"+f.Name()] = types[filepath.Ext(f.Name())]
	}
	if len(paths) < 8 {
		t.Fatalf("files %v; want the page, its scripts, its style sheet and its icon", paths)
	}
	for path, ct := range paths {
		resp := get(path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct || len(body) == 0 {
			t.Errorf("%s: %d %q, %d bytes; want 200 %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), ct)
		}
		checkHeaders(t, path, resp)
	}
	for _, path := range []string{"/console/nothing.js", "/console/", "/console/static/app.js", "/console/../go.mod"} {
		resp := get(path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), `"status":404`) {
			t.Errorf("%s: %d %q %s; want a 404 problem", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		checkHeaders(t, path, resp)
	}
}

func checkHeaders(t *testing.T, path string, resp *http.Response) {
	t.Helper()
	if got := resp.Header.Get("Content-Security-Policy"); got != console.Policy {
		t.Errorf("%s: Content-Security-Policy %q", path, got)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q", path, got)
	}
}

// TestPolicyIsStrict: the policy allows this origin alone, and no inline
// script or style.
func TestPolicyIsStrict(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(console.Policy, want) {
			t.Errorf("policy %q lacks %q", console.Policy, want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
		if strings.Contains(console.Policy, bad) {
			t.Errorf("policy %q allows %q", console.Policy, bad)
		}
	}
}

// TestFilesStayInside: the console's files load nothing from another
// origin, hold no inline script, style or event handler (which the policy
// would block), and build no HTML from strings.
func TestFilesStayInside(t *testing.T) {
	remote := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|import\s[^;]*["']https?:|url\(\s*["']?https?:|fetch\(\s*["'\x60]https?:`)
	inlineHTML := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<style|\sstyle\s*=|\son[a-z]+\s*=`)
	stringHTML := regexp.MustCompile(`\.innerHTML\s*=|\.outerHTML\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function\(|setAttribute\(\s*['"]style`)
	dir := "static"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if m := remote.FindString(s); m != "" {
			t.Errorf("%s loads from another origin: %q", e.Name(), m)
		}
		switch filepath.Ext(e.Name()) {
		case ".html":
			if m := inlineHTML.FindString(s); m != "" {
				t.Errorf("%s has inline script or style: %q", e.Name(), m)
			}
		case ".js":
			if m := stringHTML.FindString(s); m != "" {
				t.Errorf("%s builds HTML or code from strings: %q", e.Name(), m)
			}
		}
	}
}
