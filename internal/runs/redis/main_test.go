package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// server is the redis-server the package's tests share, started by the
// first test that needs it and stopped by TestMain.
var server struct {
	once sync.Once
	cmd  *exec.Cmd
	dir  string
	sock string
	err  error
	// prefixes numbers the key prefixes, one per store a test makes.
	prefixes atomic.Int64
}

func TestMain(m *testing.M) {
	code := func() int {
		defer stopServer()
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startServer runs redis-server on a unix socket in a temporary directory,
// without persistence, and waits until it answers.
func startServer() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errNoServer
	}
	dir, err := os.MkdirTemp("", "runs-redis-")
	if err != nil {
		return err
	}
	server.dir = dir
	server.sock = filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", server.sock,
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
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
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return fmt.Errorf("redis-server did not answer within 10s: %v\n%s", err, log)
		}
		time.Sleep(10 * time.Millisecond) // polling for the socket
	}
}

func stopServer() {
	if server.cmd != nil {
		_ = server.cmd.Process.Kill()
		_ = server.cmd.Wait()
	}
	if server.dir != "" {
		_ = os.RemoveAll(server.dir)
	}
}

var errNoServer = errors.New("redis-server is not installed (apt-get install redis-server)")

// newClient returns a client of the test server, closed with the test. It
// skips the test when redis-server is not installed, unless CI=true.
func newClient(t testing.TB) *goredis.Client {
	t.Helper()
	server.once.Do(func() { server.err = startServer() })
	if server.err != nil {
		if errors.Is(server.err, errNoServer) && os.Getenv("CI") != "true" {
			t.Skipf("skipping the Redis store's tests: %v", server.err)
		}
		t.Fatal(server.err)
	}
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: server.sock, PoolSize: 200})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// prefix returns a key prefix no other store of this test run uses.
func prefix() string {
	return fmt.Sprintf("t%d:", server.prefixes.Add(1))
}
