package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sampled/sampled/internal/testing/testlog"
)

// TestRedisLogsThroughSlog: go-redis's own log lines (here its pool
// failing to dial a Redis that is down) are lines of the service's JSON
// log, not plain text between them.
func TestRedisLogsThroughSlog(t *testing.T) {
	var logs testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncWriter{lines: make(chan string, 16)}
	env := map[string]string{"SAMPLED_ADDR": "127.0.0.1:0", "SAMPLED_REDIS_URL": "unix://" + t.TempDir() + "/none.sock"}
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, []string{"sampled"}, func(k string) string { return env[k] }, out, &logs) }()
	var addr string
	select {
	case line := <-out.lines:
		addr = strings.TrimPrefix(line, "listening on ")
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	if resp, err := http.Get("http://" + addr + "/v1/loops"); err == nil {
		_ = resp.Body.Close()
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	saw := false
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON line: %s", line)
		}
		saw = saw || strings.Contains(line, "failed to dial")
	}
	if !saw {
		t.Errorf("no line of go-redis in the service's log:\n%s", logs.String())
	}
}
