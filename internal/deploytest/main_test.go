package deploytest

import (
	"os"
	"testing"

	"github.com/sampled/sampled/internal/runs/redis/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	redistest.Stop()
	os.Exit(code)
}
