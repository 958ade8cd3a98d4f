// Package openaispec checks JSON bodies against OpenAI's OpenAPI
// description in reference/openai, for the tests of both sides of the
// Chat Completions dialect: the openai adapter and the /openai/v1 facade.
package openaispec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// doc is the description, loaded once per test binary: it is about 3 MB.
var doc = sync.OnceValues(func() (*openapi3.T, error) {
	path, err := find()
	if err != nil {
		return nil, err
	}
	return openapi3.NewLoader().LoadFromFile(path)
})

// find looks for reference/openai/openapi.yaml from the test's directory
// up to the module's root.
func find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		path := filepath.Join(dir, "reference", "openai", "openapi.yaml")
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Check validates body against the component schema named schema (e.g.
// CreateChatCompletionResponse), with kin-openapi's OpenAPI 3.0 visitor
// (all errors) and its JSON Schema 2020-12 validator (the document is
// OpenAPI 3.1). The second is skipped for the stream chunk: its
// finish_reason is an enum marked nullable, a keyword JSON Schema 2020-12
// does not know, so the null of every chunk but the last would be refused.
func Check(t testing.TB, schema string, body []byte) {
	t.Helper()
	d, err := doc()
	if err != nil {
		t.Fatalf("load OpenAI's OpenAPI description: %v", err)
	}
	ref := d.Components.Schemas[schema]
	if ref == nil || ref.Value == nil {
		t.Fatalf("OpenAI's OpenAPI description has no schema %s", schema)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: body is not JSON: %v\n%s", schema, err, body)
		return
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Errorf("body does not match OpenAI's %s: %v\n%s", schema, err, body)
	}
	if schema == "CreateChatCompletionStreamResponse" {
		return
	}
	if err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("body does not match OpenAI's %s (JSON Schema 2020-12): %v\n%s", schema, err, body)
	}
}
