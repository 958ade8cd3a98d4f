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
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sampled/sampled/internal/tools"
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
	// RequestTimeout bounds a whole sampling request, retries and
	// fallbacks included; 0 means 5 min.
	RequestTimeout Duration `yaml:"requestTimeout"`
	// StreamIdleTimeout bounds the wait for each fragment of a streamed
	// upstream call; 0 means 60 s.
	StreamIdleTimeout Duration `yaml:"streamIdleTimeout"`
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// headers; 0 means the provider's default.
	ResponseHeaderTimeout Duration `yaml:"responseHeaderTimeout"`
	// MCPServers are the MCP servers whose tools loops may use, in the
	// widely used mcpServers shape.
	MCPServers map[string]MCPServer `yaml:"mcpServers"`
	// Redis, when its URL is set (or SAMPLED_REDIS_URL), keeps the runs of
	// loops in Redis, shared by every replica using it.
	Redis Redis `yaml:"redis"`
	// APIKeys are the keys clients send as Authorization: Bearer; with none
	// every request is served, as for local use.
	APIKeys []APIKey `yaml:"apiKeys"`
	// Limits bound what each key, and every caller together, may ask.
	Limits Limits `yaml:"limits"`
	// MetricsNeedKey puts GET /metrics behind the API keys; by default it
	// stays open to the scraper, like /healthz and /readyz.
	MetricsNeedKey bool `yaml:"metricsNeedKey"`
	// MCPEndpoint configures sampled's own MCP server at /mcp.
	MCPEndpoint MCPEndpoint `yaml:"mcpServer"`
}

// Redis is where runs are kept when several replicas share them.
type Redis struct {
	// URL is a redis://, rediss:// or unix:// URL; it may hold a password,
	// so it is a Secret. Empty means runs stay in memory.
	URL Secret `yaml:"url"`
	// LeaseTTL is how long a run outlives its replica: the replica running
	// a loop renews its lease every third of it, and another replica ends
	// the run failed within LeaseTTL and a third once the renewals stop;
	// 0 means 10s.
	LeaseTTL Duration `yaml:"leaseTTL"`
}

// check validates the URL without ever quoting it.
func (r Redis) check() error {
	if r.LeaseTTL != 0 && time.Duration(r.LeaseTTL) < 300*time.Millisecond {
		return fmt.Errorf("redis.leaseTTL: want at least 300ms, got %s", time.Duration(r.LeaseTTL))
	}
	if r.URL == "" {
		return nil
	}
	u, err := url.Parse(r.URL.Reveal())
	if err != nil {
		return errors.New("redis.url (SAMPLED_REDIS_URL): not a URL")
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
		return nil
	}
	return errors.New("redis.url (SAMPLED_REDIS_URL): want a redis://, rediss:// or unix:// URL")
}

// APIKey is one key clients may call with: its name, and the key as a
// SHA-256 digest (Hash, "sha256:<64 hex>") or, like a provider's key, from
// an environment variable or a file.
type APIKey struct {
	// Name is the caller's identity in logs, metrics and run ownership.
	Name    string `yaml:"name"`
	Hash    string `yaml:"hash"`
	KeyEnv  string `yaml:"keyEnv"`
	KeyFile string `yaml:"keyFile"`
	// RequestsPerMinute, ConcurrentLoops, TokensPerMinute, USDPerDay and
	// USDPerMonth override Limits for this key; 0 means Limits'.
	RequestsPerMinute int     `yaml:"requestsPerMinute"`
	ConcurrentLoops   int     `yaml:"concurrentLoops"`
	TokensPerMinute   int     `yaml:"tokensPerMinute"`
	USDPerDay         float64 `yaml:"usdPerDay"`
	USDPerMonth       float64 `yaml:"usdPerMonth"`

	// Key is resolved from KeyEnv or KeyFile by Load.
	Key Secret `yaml:"-"`
}

// Limits bound the load callers may put on the service. Zero means the
// default; the per-key limits apply when API keys are configured.
type Limits struct {
	// RequestsPerMinute is each key's request rate; default 600.
	RequestsPerMinute int `yaml:"requestsPerMinute"`
	// ConcurrentLoops is how many loops each key may run at once;
	// default 10.
	ConcurrentLoops int `yaml:"concurrentLoops"`
	// TokensPerMinute is each key's rate of tokens (input and output) a
	// minute; 0 means no limit. A call is refused (429, limit "tokens")
	// when the tokens in use plus its maxTokens would pass it.
	TokensPerMinute int `yaml:"tokensPerMinute"`
	// USDPerDay and USDPerMonth are what each key may spend, in US
	// dollars at the models' prices, in a UTC day and a UTC month; 0 means
	// no limit. A call is refused (429, limit "budget") once the window's
	// spend reached its limit, or when the spend plus its maxTokens at the
	// model's output price would pass it.
	USDPerDay   float64 `yaml:"usdPerDay"`
	USDPerMonth float64 `yaml:"usdPerMonth"`
	// InFlightSamples caps the sampling requests (POST /v1/sample*,
	// /v1/messages, those of MCP servers) served at once by all callers;
	// default 256.
	InFlightSamples int `yaml:"inFlightSamples"`
	// ToolResultBytes caps each tool result a loop's model sees (a longer
	// one is cut, with a note saying so); 0 means 1 MiB.
	ToolResultBytes int `yaml:"toolResultBytes"`
	// RunBytes caps each run's event log and transcript (a run past it
	// ends failed); 0 means 16 MiB.
	RunBytes int `yaml:"runBytes"`
	// StoreBytes caps the bytes of the runs kept, in memory or in Redis:
	// past it the runs that finished first are dropped; 0 means 256 MiB.
	StoreBytes int64 `yaml:"storeBytes"`
}

// WithDefaults returns the limits with the defaults in place of zeros.
func (l Limits) WithDefaults() Limits {
	if l.RequestsPerMinute == 0 {
		l.RequestsPerMinute = 600
	}
	if l.ConcurrentLoops == 0 {
		l.ConcurrentLoops = 10
	}
	if l.InFlightSamples == 0 {
		l.InFlightSamples = 256
	}
	return l
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
	// Addr is the listen address; Load sets DefaultAddr (loopback) when
	// unset.
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

// DefaultAddr is the listen address without SAMPLED_ADDR: loopback only,
// so that a service without API keys is not open to the network by
// accident. A container sets SAMPLED_ADDR=:8080.
const DefaultAddr = "127.0.0.1:8080"

// serverFromEnv reads the server settings.
func serverFromEnv(getenv func(string) string) (Server, error) {
	s := Server{Addr: cmp.Or(getenv("SAMPLED_ADDR"), DefaultAddr), LogFormat: cmp.Or(getenv("SAMPLED_LOG_FORMAT"), "json")}
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
	// ProtocolVersion is the MCP version sampled offers the server:
	// "2025-11-25" (the default; sampling requests are pushed) or
	// "2026-07-28" (sampling requests come as "input required" results).
	ProtocolVersion string `yaml:"protocolVersion" json:"protocolVersion,omitempty"`
	// Sampling is the server's policy for the sampling/createMessage
	// requests it sends sampled.
	Sampling Sampling `yaml:"sampling" json:"sampling,omitzero"`
	// Required makes the service not ready (/readyz answers 503) while
	// the server is not connected. By default a server that is down
	// degrades the service without failing readiness: /readyz and
	// GET /v1/tools show it, its tools answer isError results, and
	// sampling and the other tools keep working.
	Required bool `yaml:"required" json:"required,omitempty"`
}

// Sampling is what one MCP server may ask of sampled as its sampling
// client. The zero value allows sampling with the default model, no cap
// beyond the service's own, DefaultSamplingRate and no client-run loop.
type Sampling struct {
	// Enabled nil means on; false refuses every request.
	Enabled *bool `yaml:"enabled" json:"enabled,omitempty"`
	// Models are the model IDs or aliases the server may use; the first is
	// used when the server's preferences select none of them. Empty means
	// the default model alone.
	Models []string `yaml:"models" json:"models,omitempty"`
	// MaxTokens caps the maxTokens of a request (lowered to it); 0 means
	// no cap.
	MaxTokens int `yaml:"maxTokens" json:"maxTokens,omitempty"`
	// RequestsPerMinute bounds the server's requests; 0 means
	// DefaultSamplingRate (PerMinute).
	RequestsPerMinute int `yaml:"requestsPerMinute" json:"requestsPerMinute,omitempty"`
	// Loop says whether the server may ask sampled to run a tool loop.
	Loop SamplingLoop `yaml:"loop" json:"loop,omitzero"`
}

// DefaultSamplingRate is an MCP server's sampling requests per minute
// when its policy sets none: a key's default rate.
const DefaultSamplingRate = 600

// On reports whether sampling is enabled.
func (s Sampling) On() bool { return s.Enabled == nil || *s.Enabled }

// PerMinute is the server's rate: RequestsPerMinute, or
// DefaultSamplingRate.
func (s Sampling) PerMinute() int { return cmp.Or(s.RequestsPerMinute, DefaultSamplingRate) }

// SamplingLoop is the policy for client-run loops: a request carrying
// maxIterations and allowedToolPatterns.
type SamplingLoop struct {
	// Allowed lets the server ask for a loop; off by default.
	Allowed bool `yaml:"allowed" json:"allowed,omitempty"`
	// Tools are patterns over sampled's exposed tool names that the
	// server's loops may reach; required when Allowed.
	Tools tools.Patterns `yaml:"tools" json:"tools,omitempty"`
	// MaxIterations caps a loop's maxIterations; 0 means 10.
	MaxIterations int `yaml:"maxIterations" json:"maxIterations,omitempty"`
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
	// Price is what the model's tokens cost; nil means unpriced: its
	// calls cost nothing and are counted as unpriced.
	Price *Price `yaml:"price"`
}

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
	// CachedInput is the price of input tokens read from the provider's
	// cache; nil means Input.
	CachedInput *float64 `yaml:"cachedInput"`
}

// check validates the price; errors name the member.
func (p *Price) check() error {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"input", &p.Input}, {"output", &p.Output}, {"cachedInput", p.CachedInput}} {
		if f.v != nil && (*f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			return fmt.Errorf("%s: want a non-negative number of US dollars per million tokens, got %v", f.name, *f.v)
		}
	}
	return nil
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
// offline provider is always available. An error names what is wrong and,
// with SAMPLED_CONFIG set, the file.
func Load(getenv func(string) string, readFile func(string) ([]byte, error)) (*Config, error) {
	path := getenv("SAMPLED_CONFIG")
	c, err := load(path, getenv, readFile)
	switch {
	case err == nil:
		return c, nil
	case path != "":
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return nil, fmt.Errorf("config: %w", err)
}

// load is Load, its errors without the prefix that says where.
func load(path string, getenv func(string) string, readFile func(string) ([]byte, error)) (*Config, error) {
	if readFile == nil {
		readFile = os.ReadFile
	}
	var c *Config
	if path != "" {
		b, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("SAMPLED_CONFIG: %w", err)
		}
		if c, err = parse(b); err != nil {
			return nil, err
		}
		// A file without providers of its own takes the one of the
		// SAMPLING_* variables; a file with some and the variables as well
		// is refused: never offline answers where a real provider was
		// asked for.
		if typ := getenv("SAMPLING_PROVIDER"); typ != "" && typ != TypeOffline {
			if len(c.Providers) > 1 || c.Providers[0].Type != TypeOffline {
				return nil, fmt.Errorf("SAMPLING_PROVIDER=%s and the file both name providers: list them in one place", typ)
			}
			env, err := fromEnv(getenv)
			if err != nil {
				return nil, err
			}
			c.Providers = env.Providers
			if c.Default == "" {
				c.Default = env.Default
			}
			if err := c.check(); err != nil {
				return nil, err
			}
		}
	} else {
		var err error
		if c, err = fromEnv(getenv); err != nil {
			return nil, err
		}
	}
	for _, e := range []struct {
		name string
		dst  *Duration
	}{{"SAMPLED_CALL_TIMEOUT", &c.CallTimeout}, {"SAMPLED_REQUEST_TIMEOUT", &c.RequestTimeout}, {"SAMPLED_STREAM_IDLE_TIMEOUT", &c.StreamIdleTimeout}} {
		if v := getenv(e.name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s: want a duration such as 90s, got %q", e.name, v)
			}
			*e.dst = Duration(d)
		}
	}
	c.Redis.URL = cmp.Or(Secret(getenv("SAMPLED_REDIS_URL")), c.Redis.URL)
	if err := c.Redis.check(); err != nil {
		return nil, err
	}
	c.MCPEndpoint.Sampling = cmp.Or(getenv("SAMPLED_MCP_SAMPLING"), c.MCPEndpoint.Sampling, MCPSamplingAuto)
	if err := c.MCPEndpoint.check(); err != nil {
		return nil, err
	}
	if err := c.resolve(getenv, readFile); err != nil {
		return nil, err
	}
	var err error
	c.Server, err = serverFromEnv(getenv)
	return c, err
}

// offlineProvider lists the offline provider's models: default, the
// fault models flaky and broken, and slow (each call takes seconds).
// They are priced at zero: their answers are made up and cost nothing,
// which a fresh start shows as a cost of 0 rather than as unpriced calls.
func offlineProvider() Provider {
	zero, half, one := 0.0, 0.5, 1.0
	free := func() *Price { return &Price{} }
	return Provider{Name: "offline", Type: TypeOffline, Models: []Model{
		{Name: "default", Cost: &one, Speed: &one, Intelligence: &half, Price: free()},
		{Name: "flaky", Cost: &one, Speed: &one, Intelligence: &half, Price: free()},
		{Name: "broken", Cost: &one, Speed: &one, Intelligence: &half, Price: free()},
		{Name: "slow", Cost: &one, Speed: &zero, Intelligence: &half, Price: free()},
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

// maxYAMLErrors is the most decoding errors of a file reported.
const maxYAMLErrors = 5

func parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // an empty file configures nothing
		// The decoder reports every repeated key against each earlier
		// one: n repeats make n²/2 lines. The first few tell what is wrong.
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > maxYAMLErrors {
			te.Errors = append(te.Errors[:maxYAMLErrors:maxYAMLErrors], fmt.Sprintf("and %d more", len(te.Errors)-maxYAMLErrors))
		}
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
			if m.Price != nil {
				if err := m.Price.check(); err != nil {
					return fmt.Errorf("%s.price.%w", mat, err)
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
		switch s.ProtocolVersion {
		case "", tools.ProtocolVersion, tools.ProtocolVersionMRTR:
		default:
			return fmt.Errorf("mcpServers.%s.protocolVersion: want %s or %s, got %q", name, tools.ProtocolVersion, tools.ProtocolVersionMRTR, s.ProtocolVersion)
		}
		if err := s.Sampling.check(known); err != nil {
			return fmt.Errorf("mcpServers.%s.sampling.%w", name, err)
		}
	}
	return c.checkAccess()
}

// check checks a server's sampling policy; the error names the field
// relative to the policy.
func (s Sampling) check(known func(string) bool) error {
	for i, m := range s.Models {
		if !known(m) {
			return fmt.Errorf("models[%d]: %q is not a configured model", i, m)
		}
	}
	switch {
	case s.MaxTokens < 0:
		return fmt.Errorf("maxTokens: must not be negative, got %d", s.MaxTokens)
	case s.RequestsPerMinute < 0:
		return fmt.Errorf("requestsPerMinute: must not be negative, got %d", s.RequestsPerMinute)
	case s.Loop.MaxIterations < 0 || s.Loop.MaxIterations > 100:
		return fmt.Errorf("loop.maxIterations: must be between 1 and 100 (0 means 10), got %d", s.Loop.MaxIterations)
	case s.Loop.Allowed && len(s.Loop.Tools) == 0:
		return errors.New("loop.tools: give the tool patterns its loops may reach (e.g. [\"std__*\"])")
	}
	for i, p := range s.Loop.Tools {
		if !p.Valid() {
			return fmt.Errorf("loop.tools[%d]: %q is not a valid glob pattern", i, p)
		}
	}
	return nil
}

// checkAccess checks apiKeys and limits.
func (c *Config) checkAccess() error {
	names := map[string]bool{}
	for i, k := range c.APIKeys {
		at := fmt.Sprintf("apiKeys[%d]", i)
		given := 0
		for _, v := range []string{k.Hash, k.KeyEnv, k.KeyFile} {
			if v != "" {
				given++
			}
		}
		switch {
		case k.Name == "":
			return fmt.Errorf("%s.name: required", at)
		case names[k.Name]:
			return fmt.Errorf("%s.name: %q is used twice", at, k.Name)
		case k.Name == "anonymous":
			return fmt.Errorf("%s.name: anonymous names the callers of a service without keys; choose another", at)
		case given != 1:
			return fmt.Errorf("%s: give one of hash, keyEnv or keyFile", at)
		case k.RequestsPerMinute < 0 || k.ConcurrentLoops < 0:
			return fmt.Errorf("%s: limits must not be negative", at)
		}
		if err := checkBudgets(k.TokensPerMinute, k.USDPerDay, k.USDPerMonth); err != nil {
			return fmt.Errorf("%s.%w", at, err)
		}
		if k.Hash != "" && !validHash(k.Hash) {
			// The value is not echoed: it may be a key pasted by mistake.
			return fmt.Errorf("%s.hash: want sha256: followed by 64 hex digits (printf %%s KEY | sha256sum)", at)
		}
		names[k.Name] = true
	}
	if l := c.Limits; l.RequestsPerMinute < 0 || l.ConcurrentLoops < 0 || l.InFlightSamples < 0 ||
		l.ToolResultBytes < 0 || l.RunBytes < 0 || l.StoreBytes < 0 {
		return errors.New("limits: must not be negative")
	}
	if err := checkBudgets(c.Limits.TokensPerMinute, c.Limits.USDPerDay, c.Limits.USDPerMonth); err != nil {
		return fmt.Errorf("limits.%w", err)
	}
	return nil
}

// checkBudgets checks the budgets of limits or of a key; the error names
// the field.
func checkBudgets(tokensPerMinute int, usdPerDay, usdPerMonth float64) error {
	if tokensPerMinute < 0 {
		return fmt.Errorf("tokensPerMinute: must not be negative, got %d", tokensPerMinute)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"usdPerDay", usdPerDay}, {"usdPerMonth", usdPerMonth}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s: want a non-negative number of US dollars, got %v", f.name, f.v)
		}
	}
	return nil
}

// validHash reports whether s is "sha256:" and 64 hex digits.
func validHash(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	_, err := hex.DecodeString(h)
	return ok && len(h) == 64 && err == nil
}

// resolve reads API keys from the environment or files.
func (c *Config) resolve(getenv func(string) string, readFile func(string) ([]byte, error)) error {
	// read reads the key of the variable env or the file file, whichever
	// is set; at and the field names say where in errors.
	read := func(at, envField, env, fileField, file string) (Secret, error) {
		switch {
		case env != "":
			if v := getenv(env); v != "" {
				return Secret(v), nil
			}
			return "", fmt.Errorf("%s.%s: environment variable %s is empty", at, envField, env)
		case file != "":
			b, err := readFile(file)
			if err != nil {
				return "", fmt.Errorf("%s.%s: cannot read %s", at, fileField, file)
			}
			if v := strings.TrimSpace(string(b)); v != "" {
				return Secret(v), nil
			}
			return "", fmt.Errorf("%s.%s: %s is empty", at, fileField, file)
		}
		return "", nil
	}
	var err error
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.APIKey, err = read(fmt.Sprintf("providers[%d]", i), "apiKeyEnv", p.APIKeyEnv, "apiKeyFile", p.APIKeyFile); err != nil {
			return err
		}
		if p.APIKey == "" && (p.Type == TypeOpenAI && p.Endpoint == "" || p.Type == TypeAnthropic) {
			return fmt.Errorf("providers[%d]: %s needs an API key (apiKeyEnv or apiKeyFile; SAMPLING_API_KEY without a file)", i, p.Type)
		}
	}
	for i := range c.APIKeys {
		k := &c.APIKeys[i]
		if k.Key, err = read(fmt.Sprintf("apiKeys[%d]", i), "keyEnv", k.KeyEnv, "keyFile", k.KeyFile); err != nil {
			return err
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
