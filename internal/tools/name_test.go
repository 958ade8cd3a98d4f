package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/metrics"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func TestExposedName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 90)
	hashOf := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])[:8]
	}
	tests := []struct {
		name         string
		server, tool string
		want         string
	}{
		{"simple", "git", "status", "git__status"},
		{"dash and underscore kept", "my-server", "get_item", "my-server__get_item"},
		{"invalid chars", "my.server", "tool/with spaces:x", "my_server__tool_with_spaces_x"},
		{"one underscore per rune", "srv", "café☕", "srv__caf__"},
		{"exactly 64", "s", strings.Repeat("t", 61), "s__" + strings.Repeat("t", 61)},
		{"65 is hashed", "s", strings.Repeat("t", 62), ("s__" + strings.Repeat("t", 62))[:55] + "_" + hashOf("s__"+strings.Repeat("t", 62))},
		{"100 chars", "server12", long, ("server12__" + long)[:55] + "_" + hashOf("server12__"+long)},
		{"hash of the unmapped name", "a.b", long, ("a_b__" + long)[:55] + "_" + hashOf("a.b__"+long)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExposedName(tt.server, tt.tool)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExposedName(%q, %q) (-want +got):\n%s", tt.server, tt.tool, diff)
			}
			if !validName.MatchString(got) {
				t.Errorf("ExposedName(%q, %q) = %q, not a valid tool name", tt.server, tt.tool, got)
			}
			if again := ExposedName(tt.server, tt.tool); again != got {
				t.Errorf("ExposedName is not stable: %q then %q", got, again)
			}
		})
	}

	t.Run("long names sharing a prefix differ", func(t *testing.T) {
		a := ExposedName("server", long+"_one")
		b := ExposedName("server", long+"_two")
		if a == b {
			t.Errorf("both names map to %q", a)
		}
		for _, n := range []string{a, b} {
			if len(n) != 64 || !validName.MatchString(n) {
				t.Errorf("%q: want 64 valid characters", n)
			}
		}
	})
}

// TestRebuildCollisions checks that tools whose exposed names collide get
// distinct, stable names.
func TestRebuildCollisions(t *testing.T) {
	t.Parallel()
	a := &server{name: "a", tools: []*mcp.Tool{{Name: "x.y"}, {Name: "x_y"}, {Name: "z"}}}
	b := &server{name: "a.x", tools: []*mcp.Tool{{Name: "y"}}}
	r := &Registry{logger: slog.New(slog.DiscardHandler), metrics: metrics.New(nil), servers: map[string]*server{"a": a, "a.x": b}}
	r.rebuild()
	type named struct{ Name, Server, Original string }
	var got []named
	for _, tool := range r.tools {
		got = append(got, named{tool.Name, tool.Server, tool.Original})
		if r.index[tool.Name].original != tool.Original || r.index[tool.Name].server.name != tool.Server {
			t.Errorf("index[%s] = %+v, want %s/%s", tool.Name, r.index[tool.Name], tool.Server, tool.Original)
		}
	}
	// Unmapped names in order: "a.x__y" < "a__x.y" < "a__x_y" < "a__z";
	// the first of the colliding ones keeps "a__x_y".
	want := []named{
		{"a__x_y", "a", "x.y"},
		{hashedName("a__x_y", "a__x_y"), "a", "x_y"},
		{"a__z", "a", "z"},
		{"a_x__y", "a.x", "y"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}
