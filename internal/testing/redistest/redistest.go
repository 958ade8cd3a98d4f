// Package redistest runs redis-servers for tests: one per test binary, on
// a unix socket in a temporary directory, without persistence (Socket,
// Client); and, for a test that restarts Redis, one of its own (New).
package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/goleak"
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
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: Socket(t), PoolSize: poolSize, MaintNotificationsConfig: noMaint()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// noMaint turns maintenance notifications off, as the app does: in its
// default mode (auto) go-redis writes to the shared options from each new
// connection whose server does not know them (Redis before 8), a data race
// between connections made at once.
func noMaint() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// start runs the test binary's redis-server.
func start() error {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return err
	}
	server.dir = dir
	server.sock = filepath.Join(dir, "redis.sock")
	server.cmd, err = launch(dir, server.sock, false)
	return err
}

// launch runs redis-server in dir on the unix socket sock, with the
// append-only file when persist is set (written at every command, so a
// restart loses nothing), and waits until it answers.
func launch(dir, sock string, persist bool) (*exec.Cmd, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoServer
	}
	logFile := filepath.Join(dir, "redis.log")
	appendOnly := "no"
	if persist {
		appendOnly = "yes"
	}
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock,
		"--save", "", "--appendonly", appendOnly, "--appendfsync", "always", "--dir", dir, "--logfile", logFile)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	c := goredis.NewClient(&goredis.Options{Network: "unix", Addr: sock, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return cmd, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(logFile)
			return nil, fmt.Errorf("redis-server did not answer within 10s: %v\n%s", err, log)
		}
		time.Sleep(10 * time.Millisecond) // polling for the socket
	}
}

// Server is a redis-server of one test, which it may stop and start again
// on the same socket, as Redis restarts under its clients.
type Server struct {
	dir, sock string
	persist   bool
	cmd       *exec.Cmd // nil while it is down
}

// New starts a redis-server of the test's own, on a unix socket, ended
// with the test. With persist it keeps its data in an append-only file
// over Down and Up; without, Up starts it empty. It skips the test when
// redis-server is not installed, unless CI=true.
func New(t testing.TB, persist bool) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{dir: dir, sock: filepath.Join(dir, "redis.sock"), persist: persist}
	s.Up(t)
	t.Cleanup(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

// Socket is the server's unix socket.
func (s *Server) Socket() string { return s.sock }

// Client returns a client of the server with the options o (its Network
// and Addr are set), closed with the test.
func (s *Server) Client(t testing.TB, o goredis.Options) *goredis.Client {
	t.Helper()
	o.Network, o.Addr = "unix", s.sock
	if o.MaintNotificationsConfig == nil {
		o.MaintNotificationsConfig = noMaint()
	}
	c := goredis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Down stops the server as an operator does (SIGTERM: it writes its
// append-only file and closes every connection) and waits until it
// exited.
func (s *Server) Down(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Up starts the server again, and waits until it answers.
func (s *Server) Up(t testing.TB) {
	t.Helper()
	cmd, err := launch(s.dir, s.sock, s.persist)
	if err != nil {
		if errors.Is(err, errNoServer) && os.Getenv("CI") != "true" {
			t.Skipf("skipping a test that needs Redis: %v", err)
		}
		t.Fatal(err)
	}
	s.cmd = cmd
}

// Main runs the tests of a package that uses the server: it stops the
// server after them and, when they passed, fails on leaked goroutines
// (checked once the server is gone). Call it from TestMain.
func Main(m *testing.M) {
	code := func() int {
		defer Stop()
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
