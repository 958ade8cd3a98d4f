package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAPIKeysAndLimits(t *testing.T) {
	const hash = "sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
	file := `apiKeys:
  - name: ci
    hash: ` + hash + `
    requestsPerMinute: 30
    tokensPerMinute: 5000
    usdPerDay: 2.5
  - name: ops
    keyEnv: OPS_KEY
  - name: bot
    keyFile: /run/secrets/bot_key
    concurrentLoops: 2
limits:
  requestsPerMinute: 120
  inFlightSamples: 8
  tokensPerMinute: 100000
  usdPerDay: 10
  usdPerMonth: 200
metricsNeedKey: true
`
	c, err := Load(env(map[string]string{"SAMPLED_CONFIG": "c.yaml", "OPS_KEY": "ops-secret"}),
		files(map[string]string{"c.yaml": file, "/run/secrets/bot_key": "bot-secret\n"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []APIKey{
		{Name: "ci", Hash: hash, RequestsPerMinute: 30, TokensPerMinute: 5000, USDPerDay: 2.5},
		{Name: "ops", KeyEnv: "OPS_KEY", Key: "ops-secret"},
		{Name: "bot", KeyFile: "/run/secrets/bot_key", ConcurrentLoops: 2, Key: "bot-secret"},
	}
	if diff := cmp.Diff(want, c.APIKeys); diff != "" {
		t.Errorf("apiKeys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Limits{RequestsPerMinute: 120, ConcurrentLoops: 10, InFlightSamples: 8,
		TokensPerMinute: 100000, USDPerDay: 10, USDPerMonth: 200}, c.Limits.WithDefaults()); diff != "" {
		t.Errorf("limits with defaults (-want +got):\n%s", diff)
	}
	if !c.MetricsNeedKey {
		t.Error("metricsNeedKey not read")
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, c.APIKeys); strings.Contains(s, "ops-secret") || strings.Contains(s, "bot-secret") {
			t.Errorf("%s prints a resolved key: %s", f, s)
		}
	}
}

func TestAPIKeysRefused(t *testing.T) {
	const pasted = "sk-live-do-not-echo-me"
	tests := []struct {
		name, file, want string
	}{
		{"no name", "apiKeys: [{keyEnv: K}]", "apiKeys[0].name: required"},
		{"name twice", "apiKeys: [{name: a, keyEnv: K}, {name: a, keyEnv: K}]", `apiKeys[1].name: "a" is used twice`},
		{"no key", "apiKeys: [{name: a}]", "apiKeys[0]: give one of hash, keyEnv or keyFile"},
		{"anonymous", "apiKeys: [{name: anonymous, keyEnv: K}]", "apiKeys[0].name: anonymous names the callers"},
		{"two sources", "apiKeys: [{name: a, keyEnv: K, keyFile: /k}]", "apiKeys[0]: give one of hash, keyEnv or keyFile"},
		{"a key as hash", "apiKeys: [{name: a, hash: " + pasted + "}]", "apiKeys[0].hash: want sha256:"},
		{"short hash", "apiKeys: [{name: a, hash: sha256:abcd}]", "apiKeys[0].hash: want sha256:"},
		{"negative key limit", "apiKeys: [{name: a, keyEnv: K, concurrentLoops: -1}]", "apiKeys[0]: limits must not be negative"},
		{"negative limit", "limits: {inFlightSamples: -1}", "limits: must not be negative"},
		{"negative tokens", "limits: {tokensPerMinute: -1}", "limits.tokensPerMinute: must not be negative, got -1"},
		{"negative day", "limits: {usdPerDay: -0.5}", "limits.usdPerDay: want a non-negative number of US dollars, got -0.5"},
		{"NaN month", "limits: {usdPerMonth: .nan}", "limits.usdPerMonth: want a non-negative number of US dollars, got NaN"},
		{"negative key tokens", "apiKeys: [{name: a, keyEnv: K, tokensPerMinute: -5}]", "apiKeys[0].tokensPerMinute: must not be negative, got -5"},
		{"infinite key month", "apiKeys: [{name: a, keyEnv: K, usdPerMonth: .inf}]", "apiKeys[0].usdPerMonth: want a non-negative number of US dollars, got +Inf"},
		{"budget not a number", "limits: {usdPerDay: lots}", "cannot unmarshal"},
		{"unknown limit", "limits: {rpm: 3}", "field rpm not found"},
		{"empty env", "apiKeys: [{name: a, keyEnv: EMPTY}]", "apiKeys[0].keyEnv: environment variable EMPTY is empty"},
		{"missing file", "apiKeys: [{name: a, keyFile: /nope}]", "apiKeys[0].keyFile: cannot read /nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(env(map[string]string{"SAMPLED_CONFIG": "c.yaml", "K": "k"}), files(map[string]string{"c.yaml": tt.file}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), pasted) {
				t.Errorf("the error echoes the hash member: %v", err)
			}
		})
	}
}
