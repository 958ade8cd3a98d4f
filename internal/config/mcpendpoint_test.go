package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMCPEndpoint(t *testing.T) {
	offline := "providers:\n  - name: offline\n    type: offline\n    models: [{name: default}]\n"
	tests := []struct {
		name    string
		yaml    string // "" reads no file
		env     map[string]string
		want    MCPEndpoint
		wantErr string
	}{
		{name: "default", want: MCPEndpoint{Sampling: MCPSamplingAuto}},
		{name: "env", env: map[string]string{"SAMPLED_MCP_SAMPLING": "service"}, want: MCPEndpoint{Sampling: MCPSamplingService}},
		{name: "file", yaml: offline + "mcpServer:\n  sampling: client\n  allowedOrigins: ['https://app.example.com', 'http://10.0.0.5:3000']\n",
			want: MCPEndpoint{Sampling: MCPSamplingClient, AllowedOrigins: []string{"https://app.example.com", "http://10.0.0.5:3000"}}},
		{name: "env overrides file", yaml: offline + "mcpServer: {sampling: client}\n", env: map[string]string{"SAMPLED_MCP_SAMPLING": "auto"},
			want: MCPEndpoint{Sampling: MCPSamplingAuto}},
		{name: "bad switch", env: map[string]string{"SAMPLED_MCP_SAMPLING": "native"}, wantErr: "mcpServer.sampling (SAMPLED_MCP_SAMPLING): want auto, client or service"},
		{name: "origin with a path", yaml: offline + "mcpServer: {allowedOrigins: ['https://a.example/x']}\n", wantErr: "mcpServer.allowedOrigins[0]"},
		{name: "origin without scheme", yaml: offline + "mcpServer: {allowedOrigins: ['a.example']}\n", wantErr: "mcpServer.allowedOrigins[0]"},
		{name: "unknown member", yaml: offline + "mcpServer: {origins: []}\n", wantErr: "field origins not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range tt.env {
				e[k] = v
			}
			if tt.yaml != "" {
				e["SAMPLED_CONFIG"] = "c.yaml"
			}
			c, err := Load(env(e), files(map[string]string{"c.yaml": tt.yaml}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.MCPEndpoint); diff != "" {
				t.Errorf("mcpServer (-want +got):\n%s", diff)
			}
		})
	}
}
