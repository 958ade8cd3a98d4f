// Package openai is the sampler.Provider for OpenAI's Chat Completions API
// and every server that speaks it (vLLM, llama.cpp, LM Studio, Ollama's /v1).
//
// It maps a sampler.Request to one non-streaming POST /chat/completions and
// the reply back to a sampler.Response. It never retries: every upstream
// failure is returned as a *sampler.UpstreamError and the Service decides.
//
// The HTTP exchange runs through github.com/sashabaranov/go-openai's Client
// (endpoint, auth header, error and reply decoding). The request body is
// encoded by this package, because go-openai v1.43.0's ChatCompletionRequest
// cannot express input_audio parts, temperature 0 (a float32 with omitempty)
// or an empty text content; the adapter's HTTPDoer sends that body in place
// of the client's own encoding. See encodeRequest.
package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/sampled/sampled/internal/sampler"
)

// Defaults of the zero Options.
const (
	DefaultName                  = "openai"
	DefaultBaseURL               = "https://api.openai.com/v1"
	DefaultResponseHeaderTimeout = 60 * time.Second
)

// Options configure a Provider; zero values mean defaults.
type Options struct {
	// Name is the provider name used in model IDs and errors; "" means
	// "openai".
	Name string
	// BaseURL is the API root, the part before /chat/completions; "" means
	// https://api.openai.com/v1. Any OpenAI-compatible server works, e.g.
	// Ollama's http://localhost:11434/v1.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends no
	// Authorization header (local servers). It is never logged or returned
	// in an error.
	APIKey string
	// HTTPClient nil means a client of its own whose transport has
	// ResponseHeaderTimeout.
	HTTPClient *http.Client
	// ResponseHeaderTimeout bounds the wait for the reply's headers; 0
	// means 60s. It is used only when HTTPClient is nil.
	ResponseHeaderTimeout time.Duration
}

// Provider is a sampler.Provider for the Chat Completions API. It is safe
// for concurrent use.
type Provider struct {
	name   string
	client *goopenai.Client
	// redact removes the API key from a text. The key itself is not a
	// field, so that printing a Provider cannot show it.
	redact sampler.Redactor
}

// New returns a Provider configured by o.
func New(o Options) *Provider {
	name := o.Name
	if name == "" {
		name = DefaultName
	}
	baseURL := strings.TrimRight(o.BaseURL, "/")
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	hc := o.HTTPClient
	if hc == nil {
		timeout := o.ResponseHeaderTimeout
		if timeout <= 0 {
			timeout = DefaultResponseHeaderTimeout
		}
		hc = sampler.NewHTTPClient(timeout)
	}
	cfg := goopenai.DefaultConfig(o.APIKey)
	cfg.BaseURL = baseURL
	cfg.HTTPClient = doer{client: hc}
	return &Provider{name: name, client: goopenai.NewClientWithConfig(cfg), redact: sampler.NewRedactor(o.APIKey)}
}

// Name returns the provider's configured name.
func (p *Provider) Name() string { return p.name }

// Sample sends req as one chat completion. Content the API cannot carry is
// refused with a *sampler.InvalidError before any call; upstream failures
// are *sampler.UpstreamError. When ctx is cancelled the error satisfies
// errors.Is(err, context.Canceled).
func (p *Provider) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	body, err := p.encodeRequest(req)
	if err != nil {
		return nil, err
	}
	x := &exchange{body: body}
	// go-openai marshals this stub and runs its checks on it; the doer sends
	// body instead.
	stub := goopenai.ChatCompletionRequest{Model: req.Model}
	resp, err := p.client.CreateChatCompletion(context.WithValue(ctx, exchangeKey{}, x), stub)
	if err != nil {
		return nil, p.upstreamError(ctx, x, err)
	}
	return p.decodeResponse(x, &resp)
}

// exchange carries one call's request body to the doer and brings back
// what go-openai does not expose: the status and Retry-After of the reply.
// It is used by one goroutine at a time: the doer runs inside the call.
type exchange struct {
	body       []byte
	status     int
	retryAfter string
}

type exchangeKey struct{}

// doer is the go-openai HTTPDoer of a Provider. It sends the body of the
// call's exchange in place of go-openai's encoding and records the status
// and the Retry-After header of the reply.
type doer struct {
	client *http.Client
}

// Do sends req with the exchange's body and records the reply's status.
func (d doer) Do(req *http.Request) (*http.Response, error) {
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if x != nil && x.body != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		body := x.body
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	resp, err := d.client.Do(req)
	if err != nil || x == nil {
		return resp, err
	}
	x.status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		x.retryAfter = resp.Header.Get("Retry-After")
	}
	return resp, nil
}
