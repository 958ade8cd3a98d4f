package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestReadmeExamples runs every curl example of those README sections
// against a freshly started service. A command must succeed (2xx), except
// the ones that show an error on purpose.
func TestReadmeExamples(t *testing.T) {
	// The sections whose shell examples run against a fresh service.
	readmeSections := []string{"## Try it", "### A retry, seen happening", "### Streaming", "### MCP-shaped endpoint",
		"### From the OpenAI SDKs", "### Service endpoints", "## Tool loops", "## Errors", "## Cost and budgets", "## Tracing"}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is required in CI to run the README examples")
		}
		t.Skip("curl not found; install curl to run the README examples")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(string(readme), readmeSections)
	if len(blocks) < len(readmeSections) {
		t.Fatalf("found %d example blocks in %d sections", len(blocks), len(readmeSections))
	}
	addr, stop, errc := start(t, nil)
	defer func() {
		stop()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	for i, b := range blocks {
		script := "set -euo pipefail\n" + strings.ReplaceAll(b, "localhost:8080", addr)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, bash, "-c", script).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("example block %d failed: %v\n--- script\n%s\n--- output\n%s", i, err, script, out)
		}
		if len(bytes.TrimSpace(out)) == 0 {
			t.Errorf("example block %d printed nothing:\n%s", i, script)
		}
	}
}

// shellBlocks returns the ```sh blocks of the given sections, with each
// curl that should succeed made to fail on an error status.
func shellBlocks(readme string, sections []string) []string {
	want := map[string]bool{}
	for _, s := range sections {
		want[s] = true
	}
	var (
		blocks  []string
		section string
		in      bool
		cur     strings.Builder
	)
	for _, line := range strings.Split(readme, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "#"):
			section = line
		case !in && line == "```sh" && want[section]:
			in = true
			cur.Reset()
		case in && line == "```":
			in = false
			blocks = append(blocks, cur.String())
		case in:
			cur.WriteString(line + "\n")
		}
	}
	for i, b := range blocks {
		// A command runs from a line that starts one to the next such
		// line; its quoted body may span several lines.
		lines := strings.Split(b, "\n")
		var cmds [][]string
		for _, l := range lines {
			starts := strings.HasPrefix(l, "curl ") || strings.HasPrefix(l, "ID=$(curl ")
			if starts || len(cmds) == 0 {
				cmds = append(cmds, nil)
			}
			cmds[len(cmds)-1] = append(cmds[len(cmds)-1], l)
		}
		var out []string
		for _, c := range cmds {
			cmd := strings.Join(c, "\n")
			// A DELETE must succeed too: the README cancels a loop
			// of offline/slow, which is still running.
			onPurpose := strings.Contains(cmd, "offline/broken") || strings.Contains(cmd, `"maxTokens":0`)
			if !onPurpose {
				cmd = strings.Replace(cmd, "curl -s", "curl --fail-with-body -s", 1)
			}
			out = append(out, cmd)
		}
		blocks[i] = strings.Join(out, "\n")
	}
	return blocks
}
