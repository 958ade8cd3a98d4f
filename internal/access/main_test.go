package access

import (
	"fmt"
	"os"
	"testing"

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
