package redis

import (
	"fmt"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sampled/sampled/internal/testing/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

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
