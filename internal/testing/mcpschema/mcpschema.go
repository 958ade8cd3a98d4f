// Package mcpschema validates JSON documents against a definition of the
// official MCP JSON Schema (reference/mcp/schema-*.json). Tests use it to
// prove that sampled's MCP-shaped input and output conform.
package mcpschema

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonschema"
)

// Validator validates documents against the definitions of one MCP schema
// file. It is safe for concurrent use.
type Validator struct {
	defs map[string]json.RawMessage
	meta json.RawMessage

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// Load reads an MCP schema file.
func Load(path string) (*Validator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcpschema: %w", err)
	}
	var doc struct {
		Schema json.RawMessage            `json:"$schema"`
		Defs   map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("mcpschema: %s: %w", path, err)
	}
	return &Validator{defs: doc.Defs, meta: doc.Schema, compiled: map[string]*jsonschema.Schema{}}, nil
}

// Validate checks doc against the definition def (e.g. "CreateMessageResult").
func (v *Validator) Validate(def string, doc []byte) error {
	s, err := v.schema(def)
	if err != nil {
		return err
	}
	res := s.ValidateJSON(doc)
	if res.IsValid() {
		return nil
	}
	errs := res.DetailedErrors()
	msgs := make([]string, 0, len(errs))
	for path, msg := range errs {
		msgs = append(msgs, path+": "+msg)
	}
	sort.Strings(msgs)
	return fmt.Errorf("not a valid %s: %s", def, strings.Join(msgs, "; "))
}

func (v *Validator) schema(def string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.compiled[def]; ok {
		return s, nil
	}
	if _, ok := v.defs[def]; !ok {
		return nil, fmt.Errorf("mcpschema: no definition %q", def)
	}
	root, err := json.Marshal(map[string]any{"$schema": v.meta, "$defs": v.defs, "$ref": "#/$defs/" + def})
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	for scheme := range c.Loaders {
		delete(c.Loaders, scheme)
	}
	s, err := c.Compile(root)
	if err != nil {
		return nil, fmt.Errorf("mcpschema: compile %s: %w", def, err)
	}
	v.compiled[def] = s
	return s, nil
}
