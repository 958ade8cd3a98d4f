// Package goclient pins oapi-codegen (a tool of this module) and the
// modules the client it generates imports. api/contract_gen_test.go
// generates a client from api/openapi.yaml into a copy of this module and
// builds it; being a module of its own keeps these requirements out of
// sampled's go.mod.
package goclient

import (
	// The generated client's runtime and its YAML decoder.
	_ "github.com/oapi-codegen/runtime"
	_ "go.yaml.in/yaml/v3"
)
