// Package anthropic is sampled's provider for Anthropic's Messages API,
// built on github.com/anthropics/anthropic-sdk-go.
//
// It maps a sampler.Request to one POST /v1/messages call and the answer
// back to a sampler.Response: whole (Sample), or streamed as server-sent
// events whose fragments are handed on as they arrive and accumulated into
// the same Response (Stream). It never retries: the SDK's own retries are
// off, and every failure is returned as a *sampler.UpstreamError for the
// Service's retry policy to judge.
//
// Schema mode uses the API's native structured output
// (output_config.format json_schema) on models that have it, and otherwise
// the tool-as-schema trick: one forced tool whose input schema is the
// target schema, whose input becomes the answer's text.
package anthropic

import (
	"context"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/sampled/sampled/internal/sampler"
)

// DefaultName is the name of a Provider whose Options give none.
const DefaultName = "anthropic"

// DefaultResponseHeaderTimeout bounds the wait for response headers of the
// HTTP client a Provider builds when Options.HTTPClient is nil.
const DefaultResponseHeaderTimeout = 60 * time.Second

// requestTimeout bounds one call, a streamed one to its last event. The
// caller's context usually ends first; the bound is given to the SDK
// explicitly because without one it refuses, on its own, non-streaming
// calls whose max_tokens suggests they may take longer than ten minutes.
const requestTimeout = 10 * time.Minute

// Options configure a Provider. The zero value of each field means its
// default.
type Options struct {
	// Name is the provider's name, the part before "/" in model IDs; ""
	// means DefaultName.
	Name string
	// BaseURL is the API's base URL; "" means the SDK's default
	// (https://api.anthropic.com/). Environment variables such as
	// ANTHROPIC_BASE_URL are never read.
	BaseURL string
	// APIKey is sent as the x-api-key header. It never appears in errors.
	APIKey string
	// HTTPClient sends the requests; nil means a client of its own whose
	// transport (a clone of http.DefaultTransport) has
	// ResponseHeaderTimeout set.
	HTTPClient *http.Client
	// ResponseHeaderTimeout bounds the wait for response headers; 0 means
	// DefaultResponseHeaderTimeout. It applies only when HTTPClient is nil.
	ResponseHeaderTimeout time.Duration
	// NativeStructuredOutput reports whether a model accepts
	// output_config.format json_schema; nil means
	// SupportsNativeStructuredOutput. Models for which it is false get
	// the tool-as-schema trick in schema mode.
	NativeStructuredOutput func(model string) bool
}

// Provider is a sampler.Provider for Anthropic's Messages API. Build it
// with New; it is safe for concurrent use.
type Provider struct {
	name     string
	redact   sampler.Redactor
	native   func(model string) bool
	messages sdk.MessageService
}

var _ sampler.Provider = (*Provider)(nil)

// New returns a Provider configured by o.
func New(o Options) *Provider {
	p := &Provider{name: o.Name, redact: sampler.NewRedactor(o.APIKey), native: o.NativeStructuredOutput}
	if p.name == "" {
		p.name = DefaultName
	}
	if p.native == nil {
		p.native = SupportsNativeStructuredOutput
	}
	client := o.HTTPClient
	if client == nil {
		timeout := o.ResponseHeaderTimeout
		if timeout <= 0 {
			timeout = DefaultResponseHeaderTimeout
		}
		client = sampler.NewHTTPClient(timeout)
	}
	opts := []option.RequestOption{
		// Credentials, base URL and headers come from Options only.
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(client),
		option.WithAPIKey(o.APIKey),
		// Retries live in internal/retry, never here.
		option.WithMaxRetries(0),
		option.WithRequestTimeout(requestTimeout),
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	c := sdk.NewClient(opts...)
	p.messages = c.Messages
	return p
}

// Name returns the provider's configured name, "anthropic" by default.
func (p *Provider) Name() string { return p.name }

// Sample sends req as one Messages API call. A request the API cannot
// express (audio, an unsupported image type, a temperature above 1) is a
// *sampler.InvalidError and no call is made; every failure of the call is a
// *sampler.UpstreamError.
func (p *Provider) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	params, trick, err := p.params(req)
	if err != nil {
		return nil, err
	}
	// The reply, kept by the SDK even when its body fails, gives the
	// status of an answer that could not be read or decoded.
	var reply *http.Response
	msg, err := p.messages.New(ctx, params, option.WithResponseInto(&reply))
	if err != nil {
		return nil, p.upstreamError(err, reply)
	}
	if msg.Type == "error" {
		// A success status whose body is an error object.
		return nil, p.errorObject(msg.RawJSON(), reply)
	}
	return response(msg, trick), nil
}
