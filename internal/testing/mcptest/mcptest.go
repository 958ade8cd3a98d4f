// Package mcptest serves tests that run the test MCP server
// (internal/tools/testdata/mcpserver) as a real child process: it builds
// the server and waits for the files the server writes.
package mcptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/testing/testwait"
)

// BuildServer builds the test MCP server into dir and returns the path of
// the executable.
func BuildServer(dir string) (string, error) {
	bin := filepath.Join(dir, "mcpserver")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sampled/sampled/internal/tools/testdata/mcpserver").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build mcpserver: %v\n%s", err, out)
	}
	return bin, nil
}

// PollFile waits until the file at path holds want, failing t after
// timeout. The file is written by another process, which cannot signal.
func PollFile(t testing.TB, path, want string, timeout time.Duration) {
	t.Helper()
	testwait.Poll(t, 5*time.Millisecond, timeout, fmt.Sprintf("%s to hold %q", path, want), func() bool {
		got, _ := os.ReadFile(path)
		return string(got) == want
	})
}
