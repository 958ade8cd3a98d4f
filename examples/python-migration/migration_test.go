// Package pythonmigration_test runs after.py, the stdlib-only Python side
// of the migration from FastMCP's ctx.sample to sampled, against an
// in-process sampled with the machine's python3.
package pythonmigration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
)

// python3 returns the path of python3, or skips the test (fails it when
// CI=true).
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		msg := "python3 is not installed; the Python migration example needs it"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skip(msg)
	}
	return py
}

// startSampled serves sampled in-process with offline/flaky as its
// default model (its first answer to a schema is broken JSON) and returns
// its URL and the paths and statuses of the requests it answered.
func startSampled(t *testing.T) (string, func() []string) {
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
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		a.Handler.ServeHTTP(sw, r)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, sw.status))
		mu.Unlock()
	}))
	t.Cleanup(func() {
		a.Drain()
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("closing the app: %v", err)
		}
	})
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// run runs python3 in isolated mode without site-packages (-I -S), so
// that only the standard library can be imported, and returns its exit
// status and standard output.
func run(t *testing.T, ctx context.Context, py, url string, args ...string) (int, []byte) {
	t.Helper()
	cmd := exec.CommandContext(ctx, py, append([]string{"-I", "-S"}, args...)...)
	cmd.Env = append(os.Environ(), "SAMPLED_URL="+url)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.Bytes()
	case errors.As(err, &exit) && ctx.Err() == nil:
		if stderr.Len() > 0 {
			t.Logf("python3 %v stderr:\n%s", args, stderr.String())
		}
		return exit.ExitCode(), stdout.Bytes()
	}
	t.Fatalf("python3 %v: %v\n%s", args, err, stderr.String())
	return 0, nil
}

// TestAfterPy: the tool's answer through POST /v1/sample/schema validates
// against its schema (offline/flaky's broken first answer corrected by
// the service), with only the standard library; a model that never
// validates comes back as SampleValidationError with its attempts and
// errors by path; before.py is valid Python.
func TestAfterPy(t *testing.T) {
	py := python3(t)
	url, seen := startSampled(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()

	code, out := run(t, ctx, py, url, "after.py", "Paris")
	if code != 0 {
		t.Fatalf("after.py Paris: exit %d: %s", code, out)
	}
	var city struct {
		City, Country *string
		Population    *json.Number
		Landmarks     *[]string
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&city); err != nil || city.City == nil || *city.City == "" || city.Country == nil || city.Population == nil || city.Landmarks == nil {
		t.Fatalf("after.py printed %s (%v); want a value of its CITY schema", out, err)
	}
	if n, err := city.Population.Int64(); err != nil || n < 0 {
		t.Errorf("population %s is not a non-negative integer", *city.Population)
	}
	if got, want := seen(), []string{"POST /v1/sample/schema 200"}; !slices.Equal(got, want) {
		t.Errorf("requests %v; want %v", got, want)
	}

	code, out = run(t, ctx, py, url, "after.py", "Paris", "offline/broken")
	var failed struct {
		Error    string
		Status   int
		Attempts int
		Errors   []struct{ Path, Message string }
	}
	if err := json.Unmarshal(out, &failed); err != nil || code != 3 {
		t.Fatalf("after.py on offline/broken: exit %d, %s (%v); want exit 3 and the error", code, out, err)
	}
	if failed.Error != "SampleValidationError" || failed.Status != 422 || failed.Attempts != 3 || len(failed.Errors) == 0 || failed.Errors[0].Path == "" {
		t.Errorf("after.py on offline/broken: %+v; want SampleValidationError, 422, 3 attempts, errors by path", failed)
	}

	// before.py needs FastMCP and a sampling client: compiled, not run.
	code, out = run(t, ctx, py, url, "-c", "import ast, sys; ast.parse(open('before.py').read(), 'before.py')")
	if code != 0 {
		t.Errorf("before.py does not parse: %s", out)
	}
}
