package redis

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/runs/redis/redistest"
)

func TestMain(m *testing.M) {
	code := func() int {
		defer redistest.Stop()
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

// newClient returns a client of the test server, closed with the test. It
// skips the test when redis-server is not installed, unless CI=true.
func newClient(t testing.TB) *goredis.Client {
	t.Helper()
	return redistest.Client(t, 200)
}

// prefixes numbers the key prefixes, one per store a test makes.
var prefixes atomic.Int64

// prefix returns a key prefix no other store of this test run uses.
func prefix() string {
	return fmt.Sprintf("t%d:", prefixes.Add(1))
}
