// Package openai is the sampler.Provider for OpenAI's Chat Completions API
// and every server that speaks it (vLLM, llama.cpp, LM Studio, Ollama's /v1).
//
// Sample maps a sampler.Request to one POST /chat/completions and the whole
// reply back to a sampler.Response. Stream (sampler.Streamer) sends the same
// request with "stream": true, reads the reply's server-sent events, hands
// each fragment on as it arrives, and returns the Response Sample would
// have. It never retries: every upstream failure is returned as a
// *sampler.UpstreamError and the Service decides.
//
// It speaks the API over net/http with the wire types of internal/chat,
// which the /openai/v1 facade shares; the tests check what it sends and
// reads against OpenAI's OpenAPI description in reference/openai. What it
// reads leniently, for compatible servers, stays here: error bodies of
// several shapes, an error member in a 200 reply, tool calls without ids.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/bufpool"
	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/sampler"
)

// Defaults of the zero Options.
const (
	DefaultName                  = "openai"
	DefaultBaseURL               = "https://api.openai.com/v1"
	DefaultResponseHeaderTimeout = 60 * time.Second
)

// jsonMediaType is the value of the Content-Type and Accept headers of every
// request; requests share it and nothing modifies it.
var jsonMediaType = []string{"application/json"}

const (
	// maxErrorBytes is the most read of an error reply: only its message
	// is kept.
	maxErrorBytes = 64 << 10
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
	// HTTPClient nil means a client of the provider's own: one transport
	// that keeps up to 256 idle connections to the upstream, with
	// ResponseHeaderTimeout. A given client is used as it is.
	HTTPClient *http.Client
	// ResponseHeaderTimeout bounds the wait for the reply's headers; 0
	// means 60s. It is used only when HTTPClient is nil.
	ResponseHeaderTimeout time.Duration
}

// Provider is a sampler.Provider for the Chat Completions API. It is safe
// for concurrent use.
type Provider struct {
	name     string
	endpoint string
	client   *http.Client
	// authorization is "Bearer <key>", nil without a key. It is a pointer
	// so that printing a Provider shows an address, not the key.
	authorization *string
	// redact removes the API key from a text.
	redact sampler.Redactor
	// strict remembers which schemas can be sent with strict:true.
	strict *strictCache
	// buffers holds the buffers replies are read into; one past 1 MiB,
	// for a large reply, is not kept. The reply's bytes are not
	// referenced after decoding: json.Unmarshal copies every string it
	// keeps.
	buffers bufpool.Pool
}

var _ sampler.Provider = (*Provider)(nil)

// New returns a Provider configured by o.
func New(o Options) *Provider {
	p := &Provider{name: o.Name, client: o.HTTPClient, redact: sampler.NewRedactor(o.APIKey), strict: newStrictCache(),
		buffers: bufpool.Pool{Max: 1 << 20}}
	if p.name == "" {
		p.name = DefaultName
	}
	base := strings.TrimRight(o.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	p.endpoint = base + "/chat/completions"
	if o.APIKey != "" {
		auth := "Bearer " + o.APIKey
		p.authorization = &auth
	}
	if p.client == nil {
		timeout := o.ResponseHeaderTimeout
		if timeout <= 0 {
			timeout = DefaultResponseHeaderTimeout
		}
		p.client = sampler.NewHTTPClient(timeout)
	}
	return p
}

// Name returns the provider's configured name.
func (p *Provider) Name() string { return p.name }

// Sample sends req as one chat completion. Content the API cannot carry is
// refused with a *sampler.InvalidError before any call; upstream failures
// are *sampler.UpstreamError. When ctx is cancelled the error satisfies
// errors.Is(err, context.Canceled).
func (p *Provider) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	if req == nil {
		return nil, errors.New("openai: nil request")
	}
	body, err := p.encodeRequest(req, false)
	if err != nil {
		return nil, err
	}
	resp, err := p.post(ctx, body, jsonMediaType)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return p.readWhole(ctx, resp)
}

// post sends body to the endpoint, asking for the media type accept, and
// returns the reply when its status is 2xx; the caller closes its body.
// Failures are *sampler.UpstreamError.
func (p *Provider) post(ctx context.Context, body []byte, accept []string) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	// Header values are shared read-only slices: one map per request.
	hreq.Header["Content-Type"] = jsonMediaType
	hreq.Header["Accept"] = accept
	if p.authorization != nil {
		hreq.Header["Authorization"] = []string{*p.authorization}
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		return nil, p.transportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, p.statusError(resp)
	}
	return resp, nil
}

// readWhole reads a 2xx reply that holds the whole answer and maps it.
func (p *Provider) readWhole(ctx context.Context, resp *http.Response) (*sampler.Response, error) {
	buf := p.buffers.Get()
	defer p.buffers.Put(buf)
	if err := readReply(buf, resp); err != nil {
		if errors.Is(err, sampler.ErrReplyTooLarge) {
			return nil, &sampler.UpstreamError{Provider: p.name, Status: resp.StatusCode, Message: err.Error()}
		}
		return nil, p.transportError(ctx, err)
	}
	var cr chat.Response
	if err := json.Unmarshal(buf.Bytes(), &cr); err != nil {
		return nil, p.unreadable(resp.StatusCode, "unreadable reply: ", err)
	}
	return p.decodeResponse(resp.StatusCode, &cr)
}

// unreadable is the *sampler.UpstreamError of a reply, or a chunk of one,
// that does not decode: what describes the failure, after what, free of
// the API key.
func (p *Provider) unreadable(status int, what string, err error) error {
	msg := err.Error()
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type == reflect.TypeFor[chat.Content]() {
		// In the words of the API, not of Go's types.
		msg = "message content is neither a string nor an array: " + te.Value
	}
	return &sampler.UpstreamError{Provider: p.name, Status: status,
		Message: what + p.redact.String(msg), Err: p.redact.Error(err)}
}

// readReply reads the body of resp into buf; the client bounds it at
// sampler.MaxReplyBytes.
func readReply(buf *bytes.Buffer, resp *http.Response) error {
	if resp.ContentLength > 0 && resp.ContentLength <= sampler.MaxReplyBytes {
		// Room for the body and the read that meets its end.
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(resp.Body)
	return err
}
