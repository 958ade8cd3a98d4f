package access

import (
	"testing"

	"github.com/sampled/sampled/internal/testing/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
