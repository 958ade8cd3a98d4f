package config

import (
	"strings"
	"testing"
	"time"
)

// TestRedisURL: the Redis URL comes from the file or SAMPLED_REDIS_URL,
// the variable winning; a bad one is refused without being quoted.
func TestRedisURL(t *testing.T) {
	const file = "redis:\n  url: redis://:filepass@db:6379/0\n"
	tests := []struct {
		name    string
		env     map[string]string
		file    string
		want    string
		wantErr string
	}{
		{name: "none", env: map[string]string{}, want: ""},
		{name: "env", env: map[string]string{"SAMPLED_REDIS_URL": "redis://:pw@localhost:6379/1"}, want: "redis://:pw@localhost:6379/1"},
		{name: "unix socket", env: map[string]string{"SAMPLED_REDIS_URL": "unix:///run/redis.sock"}, want: "unix:///run/redis.sock"},
		{name: "file", env: map[string]string{"SAMPLED_CONFIG": "c.yaml"}, file: file, want: "redis://:filepass@db:6379/0"},
		{name: "env over file", env: map[string]string{"SAMPLED_CONFIG": "c.yaml", "SAMPLED_REDIS_URL": "rediss://cache:6380"}, file: file, want: "rediss://cache:6380"},
		{name: "wrong scheme", env: map[string]string{"SAMPLED_REDIS_URL": "http://:secretpw@db"}, wantErr: "want a redis://"},
		{name: "not a URL", env: map[string]string{"SAMPLED_REDIS_URL": "redis://:secretpw@db:port\x7f"}, wantErr: "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(tt.env), files(map[string]string{"c.yaml": tt.file}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "secretpw") {
					t.Fatalf("err = %v, want one saying %q without the password", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Redis.URL.Reveal(); got != tt.want {
				t.Errorf("URL = %q, want %q", got, tt.want)
			}
			if tt.want != "" && strings.Contains(c.Redis.URL.String(), "pw") {
				t.Errorf("String() = %q shows the URL", c.Redis.URL.String())
			}
		})
	}
}

// TestRedisLeaseTTL: the lease is read from the file; one too short to
// renew is refused.
func TestRedisLeaseTTL(t *testing.T) {
	tests := []struct {
		file    string
		want    time.Duration
		wantErr string
	}{
		{file: "redis:\n  url: redis://db:6379\n", want: 0},
		{file: "redis:\n  url: redis://db:6379\n  leaseTTL: 2s\n", want: 2 * time.Second},
		{file: "redis:\n  url: redis://db:6379\n  leaseTTL: 100ms\n", wantErr: "redis.leaseTTL: want at least 300ms"},
	}
	for _, tt := range tests {
		c, err := Load(env(map[string]string{"SAMPLED_CONFIG": "c.yaml"}), files(map[string]string{"c.yaml": tt.file}))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err = %v, want %q", tt.file, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(c.Redis.LeaseTTL); got != tt.want {
			t.Errorf("%q: LeaseTTL = %v, want %v", tt.file, got, tt.want)
		}
	}
}
