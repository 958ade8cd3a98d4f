// Package config reads sampled's configuration, and is the one reader of
// its environment: the server settings (SAMPLED_ADDR, SAMPLED_LOG_FORMAT,
// SAMPLED_MAX_BODY_BYTES, SAMPLED_MAX_TOKENS, SAMPLED_CALL_TIMEOUT,
// SAMPLED_MCP_SAMPLING) and
// which providers and models sampled serves, from the SAMPLING_* variables
// for one provider or from a YAML file named by SAMPLED_CONFIG for several.
// API keys are read from the environment or from files, never from the
// configuration itself, and are never part of an error message. Every rule
// of the configuration is checked here, once; the packages it configures
// trust it.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Provider types.
const (
	TypeOffline   = "offline"
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeOllama    = "ollama"
)

// Config is the configuration of the service.
type Config struct {
	// Server holds the settings of the HTTP server, from the environment.
	Server Server `yaml:"-"`
	// Default is the default model: an ID ("provider/model") or an alias.
	Default   string     `yaml:"default"`
	Providers []Provider `yaml:"providers"`
	// CallTimeout bounds each upstream call; 0 means 120 s.
	CallTimeout Duration `yaml:"callTimeout"`
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// headers; 0 means the provider's default.
	ResponseHeaderTimeout Duration `yaml:"responseHeaderTimeout"`
	// MCPServers are the MCP servers whose tools loops may use, in the
	// widely used mcpServers shape.
	MCPServers map[string]MCPServer `yaml:"mcpServers"`
	// MCPEndpoint configures sampled's own MCP server at /mcp.
	MCPEndpoint MCPEndpoint `yaml:"mcpServer"`
}

// Who samples for the tools of sampled's MCP server (MCPEndpoint.Sampling).
const (
	// MCPSamplingAuto: the connected client when it declared the sampling
	// capability, else sampled's own providers.
	MCPSamplingAuto = "auto"
	// MCPSamplingClient: always the client; a client without the sampling
	// capability gets tool errors.
	MCPSamplingClient = "client"
	// MCPSamplingService: always sampled's own providers and loop engine.
	MCPSamplingService = "service"
)

// MCPEndpoint is the mcpServer block: sampled as an MCP server.
type MCPEndpoint struct {
	// Sampling is auto (set by Load when unset), client or service;
	// SAMPLED_MCP_SAMPLING overrides it.
	Sampling string `yaml:"sampling"`
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call /mcp, besides loopback ones, which are always allowed.
	AllowedOrigins []string `yaml:"allowedOrigins"`
}

// check validates the block; errors name the member.
func (m *MCPEndpoint) check() error {
	switch m.Sampling {
	case MCPSamplingAuto, MCPSamplingClient, MCPSamplingService:
	default:
		return fmt.Errorf("mcpServer.sampling (SAMPLED_MCP_SAMPLING): want auto, client or service, got %q", m.Sampling)
	}
	for i, o := range m.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return fmt.Errorf("mcpServer.allowedOrigins[%d]: want an origin such as https://app.example.com, got %q", i, o)
		}
	}
	return nil
}

// Server is the HTTP server's settings. Zero values mean the defaults of
// the packages they configure.
type Server struct {
	// Addr is the listen address; Load sets ":8080" when unset.
	Addr string
	// LogFormat is "json" (set by Load when unset) or "text".
	LogFormat string
	// MaxBodyBytes bounds request bodies; 0 means the HTTP layer's default.
	MaxBodyBytes int64
	// DefaultMaxTokens applies to requests that give no maxTokens; 0 means
	// the sampling service's default.
	DefaultMaxTokens int
}

// Check checks the settings, e.g. after flags changed them.
func (s *Server) Check() error {
	switch {
	case s.LogFormat != "json" && s.LogFormat != "text":
		return fmt.Errorf("log format (SAMPLED_LOG_FORMAT, -log-format): want json or text, got %q", s.LogFormat)
	case s.MaxBodyBytes < 0:
		return fmt.Errorf("max body bytes (SAMPLED_MAX_BODY_BYTES, -max-body-bytes): want a positive number, got %d", s.MaxBodyBytes)
	}
	return nil
}

// serverFromEnv reads the server settings.
func serverFromEnv(getenv func(string) string) (Server, error) {
	s := Server{Addr: ":8080", LogFormat: "json"}
	if v := getenv("SAMPLED_ADDR"); v != "" {
		s.Addr = v
	}
	if v := getenv("SAMPLED_LOG_FORMAT"); v != "" {
		s.LogFormat = v
	}
	if v := getenv("SAMPLED_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("SAMPLED_MAX_BODY_BYTES: want a positive number of bytes, got %q", v)
		}
		s.MaxBodyBytes = n
	}
	if v := getenv("SAMPLED_MAX_TOKENS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("SAMPLED_MAX_TOKENS: want a positive integer, got %q", v)
		}
		s.DefaultMaxTokens = n
	}
	return s, s.Check()
}

// MCPServer is one entry of mcpServers: Command (+Args, Env) for stdio, URL
// (+Headers) for streamable HTTP.
type MCPServer struct {
	Command string            `yaml:"command" json:"command,omitempty"`
	Args    []string          `yaml:"args" json:"args,omitempty"`
	Env     map[string]string `yaml:"env" json:"env,omitempty"`
	URL     string            `yaml:"url" json:"url,omitempty"`
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
}

// Provider is one configured backend.
type Provider struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`
	// Endpoint is the base URL; empty means the provider's public default.
	Endpoint string `yaml:"endpoint"`
	// APIKeyEnv names an environment variable holding the key.
	APIKeyEnv string `yaml:"apiKeyEnv"`
	// APIKeyFile names a file holding the key (e.g. a Docker secret).
	APIKeyFile string  `yaml:"apiKeyFile"`
	Models     []Model `yaml:"models"`

	// APIKey is resolved from APIKeyEnv or APIKeyFile by Load.
	APIKey Secret `yaml:"-"`
}

// Model is one model of a provider. Scores are in [0,1], higher is better
// (cost 1 = cheapest); a missing score is 0.5.
type Model struct {
	Name         string   `yaml:"name"`
	Aliases      []string `yaml:"aliases"`
	Cost         *float64 `yaml:"cost"`
	Speed        *float64 `yaml:"speed"`
	Intelligence *float64 `yaml:"intelligence"`
	// Fallbacks are model IDs or aliases tried after this one fails.
	Fallbacks []string `yaml:"fallbacks"`
}

// Secret is a string that never prints itself.
type Secret string

// String hides the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the secret from %#v.
func (s Secret) GoString() string { return s.String() }

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// Duration is a time.Duration written as "90s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: want a duration such as 90s, got %q", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Load reads the configuration: the file named by SAMPLED_CONFIG when set,
// else the SAMPLING_* variables, else the offline provider alone. The
// offline provider is always available.
func Load(getenv func(string) string, readFile func(string) ([]byte, error)) (*Config, error) {
	if readFile == nil {
		readFile = os.ReadFile
	}
	var c *Config
	if path := getenv("SAMPLED_CONFIG"); path != "" {
		b, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: SAMPLED_CONFIG: %w", err)
		}
		c, err = parse(b)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
	} else {
		var err error
		if c, err = fromEnv(getenv); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	if v := getenv("SAMPLED_CALL_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("config: SAMPLED_CALL_TIMEOUT: want a duration such as 90s, got %q", v)
		}
		c.CallTimeout = Duration(d)
	}
	if v := getenv("SAMPLED_MCP_SAMPLING"); v != "" {
		c.MCPEndpoint.Sampling = v
	}
	if c.MCPEndpoint.Sampling == "" {
		c.MCPEndpoint.Sampling = MCPSamplingAuto
	}
	if err := c.MCPEndpoint.check(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.resolve(getenv, readFile); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var err error
	if c.Server, err = serverFromEnv(getenv); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// offlineProvider lists the offline provider's models: default, and the
// fault models flaky and broken.
func offlineProvider() Provider {
	one := 1.0
	half := 0.5
	return Provider{Name: "offline", Type: TypeOffline, Models: []Model{
		{Name: "default", Cost: &one, Speed: &one, Intelligence: &half},
		{Name: "flaky", Cost: &one, Speed: &one, Intelligence: &half},
		{Name: "broken", Cost: &one, Speed: &one, Intelligence: &half},
	}}
}

func fromEnv(getenv func(string) string) (*Config, error) {
	typ := getenv("SAMPLING_PROVIDER")
	c := &Config{}
	if typ == "" || typ == TypeOffline {
		if getenv("SAMPLING_MODEL") != "" {
			c.Default = "offline/" + getenv("SAMPLING_MODEL")
		}
		c.Providers = []Provider{offlineProvider()}
		return c, c.check()
	}
	defaults := map[string]string{TypeOpenAI: "gpt-4o-mini", TypeAnthropic: "claude-sonnet-4-5", TypeOllama: "llama3.2"}
	model, ok := defaults[typ]
	if !ok {
		return nil, fmt.Errorf("SAMPLING_PROVIDER: want offline, openai, anthropic or ollama, got %q", typ)
	}
	if m := getenv("SAMPLING_MODEL"); m != "" {
		model = m
	}
	p := Provider{Name: typ, Type: typ, Endpoint: getenv("SAMPLING_ENDPOINT"), Models: []Model{{Name: model}}}
	if getenv("SAMPLING_API_KEY") != "" {
		p.APIKeyEnv = "SAMPLING_API_KEY"
	}
	c.Providers = []Provider{p, offlineProvider()}
	c.Default = typ + "/" + model
	return c, c.check()
}

func parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	hasOffline := false
	for _, p := range c.Providers {
		hasOffline = hasOffline || p.Name == "offline"
	}
	if !hasOffline {
		c.Providers = append(c.Providers, offlineProvider())
	}
	return &c, c.check()
}

// check validates the structure and names the first bad field.
func (c *Config) check() error {
	names := map[string]bool{}
	ids := map[string]bool{}
	aliases := map[string]bool{}
	for i, p := range c.Providers {
		at := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.Name == "":
			return fmt.Errorf("%s.name: required", at)
		case strings.ContainsAny(p.Name, "/ "):
			return fmt.Errorf("%s.name: %q must not contain '/' or spaces", at, p.Name)
		case names[p.Name]:
			return fmt.Errorf("%s.name: %q is used twice", at, p.Name)
		}
		names[p.Name] = true
		switch p.Type {
		case TypeOffline, TypeOpenAI, TypeAnthropic, TypeOllama:
		default:
			return fmt.Errorf("%s.type: want offline, openai, anthropic or ollama, got %q", at, p.Type)
		}
		if (p.Type == TypeOffline) != (p.Name == "offline") {
			return fmt.Errorf("%s: the offline provider is named offline, and only it", at)
		}
		if p.APIKeyEnv != "" && p.APIKeyFile != "" {
			return fmt.Errorf("%s: give apiKeyEnv or apiKeyFile, not both", at)
		}
		if p.Endpoint != "" && !strings.HasPrefix(p.Endpoint, "http://") && !strings.HasPrefix(p.Endpoint, "https://") {
			return fmt.Errorf("%s.endpoint: want an http:// or https:// URL, got %q", at, p.Endpoint)
		}
		if len(p.Models) == 0 {
			return fmt.Errorf("%s.models: at least one model is required", at)
		}
		for j, m := range p.Models {
			mat := fmt.Sprintf("%s.models[%d]", at, j)
			if m.Name == "" {
				return fmt.Errorf("%s.name: required", mat)
			}
			id := p.Name + "/" + m.Name
			if ids[id] {
				return fmt.Errorf("%s.name: %q is listed twice", mat, id)
			}
			ids[id] = true
			for _, s := range []struct {
				name string
				v    *float64
			}{{"cost", m.Cost}, {"speed", m.Speed}, {"intelligence", m.Intelligence}} {
				if s.v != nil && (*s.v < 0 || *s.v > 1) {
					return fmt.Errorf("%s.%s: must be between 0 and 1, got %v", mat, s.name, *s.v)
				}
			}
			for k, a := range m.Aliases {
				if a == "" || strings.Contains(a, "/") {
					return fmt.Errorf("%s.aliases[%d]: %q must be non-empty and without '/'", mat, k, a)
				}
				if aliases[a] {
					return fmt.Errorf("%s.aliases[%d]: %q is used twice", mat, k, a)
				}
				aliases[a] = true
			}
		}
	}
	known := func(s string) bool { return ids[s] || aliases[s] }
	for i, p := range c.Providers {
		for j, m := range p.Models {
			for k, f := range m.Fallbacks {
				if !known(f) {
					return fmt.Errorf("providers[%d].models[%d].fallbacks[%d]: %q is not a configured model", i, j, k, f)
				}
			}
		}
	}
	if c.Default != "" && !known(c.Default) {
		return fmt.Errorf("default: %q is not a configured model", c.Default)
	}
	for name, s := range c.MCPServers {
		switch {
		case name == "":
			return errors.New("mcpServers: a server needs a name")
		case s.Command == "" && s.URL == "":
			return fmt.Errorf("mcpServers.%s: give command (stdio) or url (streamable HTTP)", name)
		case s.Command != "" && s.URL != "":
			return fmt.Errorf("mcpServers.%s: give command or url, not both", name)
		}
	}
	return nil
}

// resolve reads API keys from the environment or files.
func (c *Config) resolve(getenv func(string) string, readFile func(string) ([]byte, error)) error {
	for i := range c.Providers {
		p := &c.Providers[i]
		switch {
		case p.APIKeyEnv != "":
			v := getenv(p.APIKeyEnv)
			if v == "" {
				return fmt.Errorf("providers[%d].apiKeyEnv: environment variable %s is empty", i, p.APIKeyEnv)
			}
			p.APIKey = Secret(v)
		case p.APIKeyFile != "":
			b, err := readFile(p.APIKeyFile)
			if err != nil {
				return fmt.Errorf("providers[%d].apiKeyFile: cannot read %s", i, p.APIKeyFile)
			}
			p.APIKey = Secret(strings.TrimSpace(string(b)))
			if p.APIKey == "" {
				return fmt.Errorf("providers[%d].apiKeyFile: %s is empty", i, p.APIKeyFile)
			}
		case p.Type == TypeOpenAI && p.Endpoint == "", p.Type == TypeAnthropic:
			return fmt.Errorf("providers[%d]: %s needs an API key (apiKeyEnv or apiKeyFile; SAMPLING_API_KEY without a file)", i, p.Type)
		}
	}
	return nil
}

// Score returns a model score, 0.5 when unset.
func Score(v *float64) float64 {
	if v == nil {
		return 0.5
	}
	return *v
}
