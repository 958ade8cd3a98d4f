package access

import (
	"testing"

	"github.com/sampled/sampled/internal/runs/redis/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
