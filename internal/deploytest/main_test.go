package deploytest

import (
	"os"
	"testing"

	"github.com/sampled/sampled/internal/testing/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	redistest.Stop()
	os.Exit(code)
}
