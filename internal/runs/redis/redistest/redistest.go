// Package redistest runs a redis-server for tests: one per test binary, on
// a unix socket in a temporary directory, without persistence.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// server is the one redis-server of the test binary.
var server struct {
	once sync.Once
	cmd  *exec.Cmd
	dir  string
	sock string
	err  error
}

// errNoServer: redis-server is not on PATH.
var errNoServer = errors.New("redis-server is not installed (apt-get install redis-server)")

// Socket returns the unix socket of the test binary's redis-server,
// starting it on first use. It skips the test when redis-server is not
// installed, unless CI=true, where that fails the test. Call Stop from
// TestMain after the tests ran.
func Socket(t testing.TB) string {
	t.Helper()
	server.once.Do(func() { server.err = start() })
	if server.err != nil {
		if errors.Is(server.err, errNoServer) && os.Getenv("CI") != "true" {
			t.Skipf("skipping a test that needs Redis: %v", server.err)
		}
		t.Fatal(server.err)
	}
	return server.sock
}

// Client returns a client of the test server with the given pool size,
// closed with the test.
func Client(t testing.TB, poolSize int) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: Socket(t), PoolSize: poolSize})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// start runs redis-server and waits until it answers.
func start() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errNoServer
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return err
	}
	server.dir = dir
	server.sock = filepath.Join(dir, "redis.sock")
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", server.sock,
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", logFile)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	server.cmd = cmd
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.sock})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			return fmt.Errorf("redis-server did not answer within 10s: %v\n%s", err, log)
		}
		time.Sleep(10 * time.Millisecond) // polling for the socket
	}
}

// Stop ends the redis-server, if one was started, and removes its
// directory.
func Stop() {
	if server.cmd != nil {
		_ = server.cmd.Process.Kill()
		_ = server.cmd.Wait()
	}
	if server.dir != "" {
		_ = os.RemoveAll(server.dir)
	}
}
