package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientFromAnotherModule follows README's instructions for using the
// Go client from another module ("From Go"): in a module outside the
// repository, the commands of the README's blocks (a replace directive to
// a clone, here this working tree, or a workspace) make a program that
// uses the client build. The commands run as a user's would, through the
// environment's module proxy: a workspace reads the go.mod of every module
// in the repository's graph, more than `go test ./...` downloads, so on a
// fresh machine those are fetched here; a warm cache fetches nothing. The
// repository's go.sum gives the hashes.
func TestClientFromAnotherModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	steps := readmeGoSteps(t)
	for _, variant := range []string{"go mod ", "go work "} {
		t.Run(strings.TrimSpace(variant), func(t *testing.T) {
			dir := t.TempDir()
			app := filepath.Join(dir, "app")
			if err := os.Mkdir(app, 0o755); err != nil {
				t.Fatal(err)
			}
			// The clone beside the module, as the README puts it.
			if err := os.Symlink(root, filepath.Join(dir, "sampled")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(app, "go.mod"), []byte("module example.com/app\n\ngo 1.26\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(clientProgram), 0o644); err != nil {
				t.Fatal(err)
			}
			sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(app, "go.sum"), sums, 0o644); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "GOWORK=")
			if variant == "go mod " {
				env = append(env, "GOFLAGS=-mod=mod") // a workspace takes no -mod
			}
			ran := 0
			for _, s := range append(steps, "go build -o app.bin .") {
				if !strings.HasPrefix(s, variant) && !strings.HasPrefix(s, "go build") {
					continue
				}
				ran++
				cmd := exec.Command(goBin, strings.Fields(s)[1:]...)
				cmd.Dir = app
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", s, err, out)
				}
			}
			if ran < 2 {
				t.Fatalf("README's From Go section has no %q command for another module (steps: %q)", variant, steps)
			}
		})
	}
}

// clientProgram is a program of another module that uses the client.
const clientProgram = `package main

import (
	"context"
	"fmt"

	"github.com/sampled/sampled/client"
)

func main() {
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		panic(err)
	}
	res, err := c.Sample(context.Background(), &client.SampleRequest{Prompt: "hello"})
	fmt.Println(res, err)
}
`

// readmeGoSteps returns the go commands of the shell blocks of README's
// "From Go" section.
func readmeGoSteps(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## From Go\n")
	if !ok {
		t.Fatal("README has no From Go section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var steps []string
	for i, block := range strings.Split(section, "```") {
		if i%2 == 0 || !strings.HasPrefix(block, "sh\n") {
			continue
		}
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, "go ") {
				steps = append(steps, strings.TrimSpace(line))
			}
		}
	}
	return steps
}
