// Package mcptest serves tests that run MCP peers as real child
// processes: it builds the test MCP server
// (internal/tools/testdata/mcpserver), waits for the files the server
// writes, and finds node for the TypeScript peers.
package mcptest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// NeedNode returns the path of node. It skips t when node or the
// TypeScript peers' SDK (under peers/node_modules) is missing, unless
// CI=true, where it fails t.
func NeedNode(t testing.TB, peers string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(peers, "node_modules", "@modelcontextprotocol", "sdk"))
	}
	if err != nil {
		msg := fmt.Sprintf("needs node and `npm ci --prefix %s`: %v", peers, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// StartServing starts cmd, a server that prints its URL as the first line
// of its stdout, kills it at the test's end, and returns the URL.
func StartServing(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the URL of %s: %v", cmd.Path, err)
	}
	return strings.TrimSpace(url)
}
