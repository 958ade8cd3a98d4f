package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The code generators and the linter live in api/check: npm packages pinned
// by its package-lock.json, and oapi-codegen pinned as a tool of the module
// api/check/goclient.
const (
	checkDir     = "check"
	goClientDir  = "check/goclient"
	nodeModules  = "check/node_modules"
	generateTime = 3 * time.Minute
)

// readmeBodyPaths are the endpoints whose README request bodies must
// type-check against the TypeScript types generated from the document.
func readmeBodyPaths() []string {
	return []string{"/v1/sample", "/v1/sample/schema", "/v1/sample/tools", "/v1/messages", "/v1/loops"}
}

// need skips the test with a message that says what it cannot run without
// (a program, an install step), or fails it when CI=true: CI must run it.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// run runs name with args in dir; a failure ends the test with the
// command's output.
func run(t *testing.T, ctx context.Context, env []string, dir, name string, args ...string) {
	t.Helper()
	if _, err := runOutput(ctx, env, dir, name, args...); err != nil {
		t.Fatalf("%v", err)
	}
}

// runOutput runs name with args in dir and returns its standard output, or
// an error that holds both outputs.
func runOutput(ctx context.Context, env []string, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s (in %s): %w\n--- stdout\n%s\n--- stderr\n%s",
			name, strings.Join(args, " "), dir, err, clip(stdout.String()), clip(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// clip cuts a command's output that would flood the test log.
func clip(s string) string {
	if len(s) > 8000 {
		return s[:8000] + "…"
	}
	return s
}

// TestGoClientGenerates generates a Go client with the pinned oapi-codegen
// (every component, not only the referenced ones) and builds it, with uses
// of the types generators used to get wrong: JSON Schema members as maps,
// one ToolChoice field, and LoopEvent as a union told apart by its event.
func TestGoClientGenerates(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		need(t, "the go command is not on PATH; it generates and builds the client")
	}
	ctx, cancel := context.WithTimeout(t.Context(), generateTime)
	defer cancel()
	// The go commands work on api/check/goclient alone, read only, whatever
	// the caller's GOFLAGS or go.work say.
	goEnv := []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}
	modDir, err := filepath.Abs(goClientDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runOutput(ctx, goEnv, modDir, goBin, "mod", "download"); err != nil {
		need(t, "the modules of api/check/goclient (oapi-codegen) cannot be had: no module cache or proxy?\n%v", err)
	}

	// A copy of the module, with the generated client in it.
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum", "deps.go"} {
		b, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`package: goclient
generate:
  client: true
  models: true
output-options:
  skip-prune: true
output: %s
`, filepath.Join(dir, "client.gen.go"))
	cfgFile := filepath.Join(dir, "oapi-codegen.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, goEnv, modDir, goBin, "tool", "oapi-codegen", "-config", cfgFile, spec)
	if err := os.WriteFile(filepath.Join(dir, "uses.go"), []byte(goClientUses), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, goEnv, dir, goBin, "build", "./...")
}

// goClientUses compiles only against a client whose JSON Schema members are
// maps, whose SampleRequest has one ToolChoice field, and whose LoopEvent
// has oapi-codegen's discriminator methods.
const goClientUses = `package goclient

var (
	_ JSONSchema = map[string]any{"type": "object"}
	_            = SampleRequest{Schema: &JSONSchema{}, ToolChoice: &ToolChoice{}, Metadata: &map[string]any{}}
	_            = Tool{InputSchema: ObjectSchema{Type: "object", Properties: &map[string]map[string]any{"city": {"type": "string"}}}}
	_            = ToolResultContent{StructuredContent: &map[string]any{"value": 14}}
	_            = ToolStartedEvent{Arguments: map[string]any{"expression": "1 + 1"}}
)

func eventData(e LoopEvent) (any, error) {
	if _, err := e.Discriminator(); err != nil {
		return nil, err
	}
	return e.ValueByDiscriminator()
}

var _ = eventData
`

// TestTypeScriptTypesFitReadme generates TypeScript types with the pinned
// openapi-typescript and type-checks with tsc every request body of the
// README's curl examples of readmeBodyPaths, each assigned to its
// operation's request body type, and a switch over LoopEvent that needs it
// to be a union told apart by event.
func TestTypeScriptTypesFitReadme(t *testing.T) {
	t.Parallel()
	node := nodeTool(t)
	ctx, cancel := context.WithTimeout(t.Context(), generateTime)
	defer cancel()
	bodies := readmeRequestBodies(t)
	dir := t.TempDir()
	run(t, ctx, nil, ".", node, filepath.Join(nodeModules, "openapi-typescript/bin/cli.js"),
		"openapi.yaml", "-o", filepath.Join(dir, "api.d.ts"))
	src, err := readmeBodiesTS(bodies)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "readme.ts"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(tsconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	tsc, err := filepath.Abs(filepath.Join(nodeModules, "typescript/bin/tsc"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, nil, dir, node, tsc, "-p", dir)
	t.Logf("tsc accepts the %d README bodies of %v", len(bodies), readmeBodyPaths())
}

// tsconfig type-checks readme.ts strictly, with no ambient types.
const tsconfig = `{
  "compilerOptions": {
    "strict": true,
    "noEmit": true,
    "target": "es2022",
    "module": "esnext",
    "moduleResolution": "bundler",
    "types": []
  },
  "files": ["readme.ts"]
}
`

// readmeBodiesTS is a TypeScript module that assigns each body to the
// request body type of its operation, and narrows a LoopEvent by event.
func readmeBodiesTS(bodies []readmeBody) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`import type { components, paths } from "./api";

export function toolArguments(e: components["schemas"]["LoopEvent"]): { [key: string]: unknown } | undefined {
  switch (e.event) {
    case "tool.started":
      return e.data.arguments;
    case "tool.completed":
      return e.data.structuredContent;
    default:
      return undefined;
  }
}
`)
	for i, body := range bodies {
		if !json.Valid([]byte(body.json)) {
			return nil, fmt.Errorf("README line %d: the body of POST %s is not JSON: %s", body.line, body.path, body.json)
		}
		fmt.Fprintf(&b, "\n// README line %d, POST %s\nexport const body%d: NonNullable<paths[%q][\"post\"][\"requestBody\"]>[\"content\"][\"application/json\"] = %s;\n",
			body.line, body.path, i, body.path, body.json)
	}
	return b.Bytes(), nil
}

// TestRedoclyLint lints the document with the pinned Redocly CLI and its
// recommended rules: no error, and no warning but the ones
// check/.redocly.lint-ignore.yaml lists (check/redocly.yaml says why).
func TestRedoclyLint(t *testing.T) {
	t.Parallel()
	node := nodeTool(t)
	ctx, cancel := context.WithTimeout(t.Context(), generateTime)
	defer cancel()
	// Redocly's usage telemetry and update check would call out.
	env := []string{"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true"}
	out, err := runOutput(ctx, env, checkDir, node, "node_modules/@redocly/cli/bin/cli.js",
		"lint", "../openapi.yaml", "--config", "redocly.yaml", "--format", "json")
	var report struct {
		Totals struct {
			Errors, Warnings, Ignored int
		}
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string
			Message  string
			Location []struct {
				Pointer string
				Start   struct{ Line, Col int }
			}
		}
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("redocly lint did not report in JSON (%v): %v", jerr, err)
	}
	for _, p := range report.Problems {
		at := ""
		if len(p.Location) > 0 {
			at = fmt.Sprintf("openapi.yaml:%d:%d %s", p.Location[0].Start.Line, p.Location[0].Start.Col, p.Location[0].Pointer)
		}
		t.Errorf("%s %s: %s: %s", p.Severity, p.RuleID, at, p.Message)
	}
	if report.Totals.Errors+report.Totals.Warnings > 0 {
		t.Errorf("redocly lint: %d errors, %d warnings; fix them, or list a warning that must stay in api/check/.redocly.lint-ignore.yaml and say why in api/check/redocly.yaml",
			report.Totals.Errors, report.Totals.Warnings)
	}
	if err != nil && !t.Failed() {
		t.Errorf("redocly lint failed without reporting a problem: %v", err)
	}
	t.Logf("redocly lint: %d errors, %d warnings, %d ignored on purpose", report.Totals.Errors, report.Totals.Warnings, report.Totals.Ignored)
}

// nodeTool returns the node binary, after checking that api/check's npm
// packages are installed.
func nodeTool(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node is not on PATH; install Node.js to run the contract's generators")
	}
	for _, f := range []string{"openapi-typescript/bin/cli.js", "typescript/bin/tsc", "@redocly/cli/bin/cli.js"} {
		if _, err := os.Stat(filepath.Join(nodeModules, f)); err != nil {
			need(t, "api/check's npm packages are not installed (%v); run: npm ci --prefix api/check", err)
		}
	}
	return node
}

// readmeBody is the JSON body of one curl example of README.
type readmeBody struct {
	line int    // where the command starts, from 1
	path string // the request's path, /v1/…
	json string
}

// readmeBodies returns the bodies of README's curl examples for the paths
// of readmeBodyPaths. As cmd/server's README test does, it reads the ```sh
// blocks and splits each into commands, a command running from a line that
// starts one (curl, or ID=$(curl) to the next.
func readmeBodies(readme string) []readmeBody {
	// The path of a curl command's URL, and its single-quoted body, where
	// '\'' stands for a quote.
	curlURL := regexp.MustCompile(`localhost:8080(/[A-Za-z0-9_/.-]*)`)
	curlData := regexp.MustCompile(`(?s)-d '((?:[^']|'\\'')*)'`)
	paths := readmeBodyPaths()
	var (
		out     []readmeBody
		in      bool
		cmd     strings.Builder
		cmdLine int
	)
	flush := func() {
		c := cmd.String()
		cmd.Reset()
		u, d := curlURL.FindStringSubmatch(c), curlData.FindStringSubmatch(c)
		if u == nil || d == nil || !slices.Contains(paths, u[1]) {
			return
		}
		out = append(out, readmeBody{line: cmdLine, path: u[1], json: strings.ReplaceAll(d[1], `'\''`, "'")})
	}
	for i, line := range strings.Split(readme, "\n") {
		switch {
		case !in && line == "```sh":
			in = true
		case in && line == "```":
			flush()
			in = false
		case in:
			if strings.HasPrefix(line, "curl ") || strings.HasPrefix(line, "ID=$(curl ") {
				flush()
				cmdLine = i + 1
			}
			cmd.WriteString(line + "\n")
		}
	}
	return out
}

func TestReadmeBodies(t *testing.T) {
	tests := []struct {
		name   string
		readme string
		want   []readmeBody
	}{
		{
			name: "a body over several lines, a command without one, one with a query",
			readme: "# x\n```sh\n# plain\ncurl -s localhost:8080/v1/sample -H 'content-type: application/json' -d '{\n  \"prompt\": \"a\"}'\n" +
				"curl -s localhost:8080/v1/models\ncurl -s 'localhost:8080/v1/loops?limit=2'\n```\n",
			want: []readmeBody{{line: 4, path: "/v1/sample", json: "{\n  \"prompt\": \"a\"}"}},
		},
		{
			name: "every endpoint, ID=$(curl, a quoted quote, and sh blocks only",
			readme: "```sh\ncurl -s localhost:8080/v1/sample/schema -d '{\"schema\":{}}'\ncurl -s localhost:8080/v1/sample/tools \\\n  -d '{\"tools\":[]}'\n```\n" +
				"```json\ncurl -s localhost:8080/v1/sample -d '{\"not\":\"sh\"}'\n```\n" +
				"```sh\nID=$(curl -s localhost:8080/v1/loops -H 'content-type: application/json' \\\n  -d '{\"prompt\":\"p\"}' | sed 's/x/y/')\n" +
				"curl -s localhost:8080/v1/messages -d '{\"maxTokens\":1}'\ncurl -s localhost:8080/v1/other -d '{}'\n" +
				"curl -s localhost:8080/v1/sample -d '{\"prompt\":\"What'\\''s up?\"}' | jq .\n```\n",
			want: []readmeBody{
				{line: 2, path: "/v1/sample/schema", json: `{"schema":{}}`},
				{line: 3, path: "/v1/sample/tools", json: `{"tools":[]}`},
				{line: 10, path: "/v1/loops", json: `{"prompt":"p"}`},
				{line: 12, path: "/v1/messages", json: `{"maxTokens":1}`},
				{line: 14, path: "/v1/sample", json: `{"prompt":"What's up?"}`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readmeBodies(tt.readme)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(readmeBody{})); diff != "" {
				t.Errorf("readmeBodies (-want +got):\n%s", diff)
			}
		})
	}
}

// readmeRequestBodies returns the request bodies of the README's curl
// examples, failing t if a sampling route has none.
func readmeRequestBodies(t *testing.T) []readmeBody {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	bodies := readmeBodies(string(readme))
	for _, p := range readmeBodyPaths() {
		if !slices.ContainsFunc(bodies, func(b readmeBody) bool { return b.path == p }) {
			t.Errorf("README has no curl example with a body for POST %s", p)
		}
	}
	return bodies
}

// TestReadmeBodiesFound keeps the extraction honest on the real README: it
// finds the bodies the TypeScript check type-checks, and each is JSON.
func TestReadmeBodiesFound(t *testing.T) {
	bodies := readmeRequestBodies(t)
	if _, err := readmeBodiesTS(bodies); err != nil {
		t.Error(err)
	}
}
