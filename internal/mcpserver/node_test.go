package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// peersDir holds the npm peers: the conformance suite and the TypeScript
// SDK, installed by `npm ci --prefix internal/mcpserver/testdata/peers`.
const peersDir = "testdata/peers"

// nodePeers returns node and the absolute peers directory; without them the
// test is skipped, except in CI (CI=true), where it fails.
func nodePeers(t *testing.T) (string, string) {
	t.Helper()
	dir, err := filepath.Abs(peersDir)
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	default:
		if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
			missing = "run npm ci --prefix internal/mcpserver/testdata/peers"
		}
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the npm peers are required in CI: %s", missing)
		}
		t.Skipf("the npm peers are missing: %s", missing)
	}
	return node, dir
}

// runNode runs a node script with args and returns its stdout.
func runNode(t *testing.T, node string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = t.TempDir() // the conformance suite writes its results here
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Logf("stderr of node %s:\n%s", strings.Join(args, " "), stderr.String())
	}
	return string(out), err
}

// conformanceScenarios are the scenarios of @modelcontextprotocol/conformance
// that test a server without the suite's own named test tools; the others
// are listed, with why they do not apply, in README ("sampled as an MCP
// server").
var conformanceScenarios = []string{
	"server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "dns-rebinding-protection", "logging-set-level",
}

// TestConformance runs the official MCP conformance suite in server mode
// against /mcp of a test-started sampled.
func TestConformance(t *testing.T) {
	node, dir := nodePeers(t)
	s := start(t, map[string]string{}, "")
	bin := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			out, err := runNode(t, node, bin, "server", "--url", s.url, "--scenario", sc)
			if err != nil || !strings.Contains(out, " 0 failed") {
				t.Errorf("scenario %s: %v\n%s", sc, err, out)
			}
		})
	}
}

// TestTypeScriptClientSamples: a TypeScript-SDK client that declares
// sampling with tools samples for the tools; sampled validates its
// answers, corrects the invalid one, and the SDK checks the results
// against the tools' output schemas.
func TestTypeScriptClientSamples(t *testing.T) {
	node, dir := nodePeers(t)
	s := start(t, map[string]string{}, "")
	out, err := runNode(t, node, filepath.Join(dir, "sampling-client.mjs"), s.url)
	if err != nil {
		t.Fatalf("sampling-client.mjs: %v", err)
	}
	var got struct {
		Classify struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"classify"`
		Delegate struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"delegate"`
		Requests []struct {
			Messages []struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
			Meta map[string]any `json:"_meta"`
		} `json:"requests"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	labels, _ := json.Marshal(got.Classify.StructuredContent)
	if got.Classify.IsError || string(labels) != `{"labels":["billing"],"scores":{"billing":0.9,"support":0.1}}` {
		t.Errorf("agent_classify: isError %v, %s; want the client's second answer", got.Classify.IsError, labels)
	}
	if len(got.Requests) != 3 {
		t.Fatalf("%d sampling requests, want 3 (classify, its correction, delegate)", len(got.Requests))
	}
	if msgs := got.Requests[1].Messages; len(msgs) != 3 || !strings.Contains(msgs[2].Content.Text, "/labels/0") || !strings.Contains(msgs[2].Content.Text, "/scores") {
		t.Errorf("the correction does not name the errors: %+v", msgs)
	}
	if d := got.Delegate.StructuredContent; d["success"] != true || d["result"] != "ran the loop over std__* in at most 2 iterations" {
		t.Errorf("agent_delegate: %v", d)
	}
	if s.toolCalls(t, "agent_classify", "client", "ok") != 1 || s.toolCalls(t, "agent_delegate", "client", "ok") != 1 {
		t.Error("the client-sampled calls are not counted")
	}
}
