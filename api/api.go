// Package api holds sampled's HTTP contract, api/openapi.yaml, embedded so
// the service can serve it at GET /openapi.yaml.
package api

import _ "embed"

//go:embed openapi.yaml
var spec []byte

// Spec returns the OpenAPI 3.1 document of the service.
func Spec() []byte { return spec }
