// Package ollama is sampled's provider for Ollama's native chat API
// (POST /api/chat), spoken over net/http without a client library. Sample
// asks for the whole answer ("stream": false); Stream asks for a stream
// ("stream": true), reads its NDJSON lines as they arrive, hands each
// fragment on and returns the same Response Sample would.
//
// Ollama has no tool choice, so the provider emulates it: "none" sends no
// tools, {mode:"tool", name} sends only the named tool, "auto" and
// "required" send every tool. A "required" answer without a tool call is
// returned as it is; the Service's guaranteed helper checks it and retries.
// Schema mode sends the schema as Ollama's "format".
//
// Like every provider it never retries: failures are *sampler.UpstreamError
// values that the Service's retry policy classifies.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sampled/sampled/internal/retry"
	"github.com/sampled/sampled/internal/sampler"
)

// Defaults of the zero Options.
const (
	DefaultName                  = "ollama"
	DefaultBaseURL               = "http://localhost:11434"
	DefaultResponseHeaderTimeout = 120 * time.Second
)

// Bounds on what the provider reads of an upstream answer.
const (
	maxErrorBody   = 64 << 10 // bytes of an error body read
	maxSuccessBody = 32 << 20 // bytes of a success body accepted
	maxMessage     = 300      // runes of an upstream error message kept
)

// Options configure a Provider; zero values mean defaults.
type Options struct {
	// Name is the provider's configured name; "" means "ollama".
	Name string
	// BaseURL is the Ollama server's root URL, without "/api"; "" means
	// http://localhost:11434. A path prefix (a reverse proxy) is kept.
	BaseURL string
	// HTTPClient sends the requests; nil means a client of its own whose
	// transport has ResponseHeaderTimeout (never http.DefaultClient). A
	// given client is used as it is and ResponseHeaderTimeout is ignored.
	HTTPClient *http.Client
	// ResponseHeaderTimeout bounds the wait for the response headers of
	// the provider's own client; 0 means 120s. Sample's answers are not
	// streamed, so for Sample it bounds the whole generation, including the
	// loading of a model. For Stream it bounds the wait for the stream's
	// first line (the model loaded, the prompt read); the Service bounds
	// the wait for each fragment after that with its idle timeout.
	ResponseHeaderTimeout time.Duration
}

// Provider calls Ollama's /api/chat. Build it with New; it is safe for
// concurrent use.
type Provider struct {
	name     string
	endpoint string
	client   *http.Client
}

var _ sampler.Provider = (*Provider)(nil)

// New returns a Provider configured by o.
func New(o Options) *Provider {
	p := &Provider{name: o.Name, client: o.HTTPClient}
	if p.name == "" {
		p.name = DefaultName
	}
	base := o.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	p.endpoint = strings.TrimRight(base, "/") + "/api/chat"
	if p.client == nil {
		timeout := o.ResponseHeaderTimeout
		if timeout <= 0 {
			timeout = DefaultResponseHeaderTimeout
		}
		p.client = sampler.NewHTTPClient(timeout)
	}
	return p
}

// Name returns the provider's configured name, "ollama" by default.
func (p *Provider) Name() string { return p.name }

// Sample runs one non-streamed chat completion. A request Ollama cannot
// express (audio, a forced tool that is not declared) is a
// *sampler.InvalidError; a failed call is a *sampler.UpstreamError, whose
// chain holds context.Canceled when ctx was cancelled.
func (p *Provider) Sample(ctx context.Context, req *sampler.Request) (*sampler.Response, error) {
	resp, err := p.post(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSuccessBody+1))
	if errors.Is(err, sampler.ErrReplyTooLarge) {
		// An answer, too large: not a connection failure to retry.
		return nil, &sampler.UpstreamError{Provider: p.name, Status: resp.StatusCode, Message: err.Error()}
	}
	if err != nil {
		return nil, p.transportError(ctx, err)
	}
	if len(data) > maxSuccessBody {
		return nil, &sampler.UpstreamError{Provider: p.name, Status: resp.StatusCode,
			Message: fmt.Sprintf("response body exceeds %d MiB", maxSuccessBody>>20)}
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return nil, &sampler.UpstreamError{Provider: p.name, Status: resp.StatusCode,
			Message: "malformed response body", Err: err}
	}
	if cr.Error != "" {
		return nil, &sampler.UpstreamError{Provider: p.name, Status: resp.StatusCode,
			Message: truncate(cr.Error)}
	}
	return toResponse(&cr), nil
}

// post sends req to /api/chat, streamed or not, and returns the reply when
// its status is a success; the caller closes its body. A request Ollama
// cannot express is a *sampler.InvalidError, a failed call or an error
// status a *sampler.UpstreamError.
func (p *Provider) post(ctx context.Context, req *sampler.Request, stream bool) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("ollama: nil request")
	}
	wire, err := buildRequest(req)
	if err != nil {
		return nil, err
	}
	wire.Stream = stream
	body, err := json.Marshal(wire)
	if err != nil {
		return nil, fmt.Errorf("ollama: encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if stream {
		hreq.Header.Set("Accept", "application/x-ndjson")
	} else {
		hreq.Header.Set("Accept", "application/json")
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

// transportError classifies a failure to get or read a response: the
// caller's cancellation, a timeout (the caller's deadline or the
// transport's), or a connection failure (Status 0).
func (p *Provider) transportError(ctx context.Context, err error) *sampler.UpstreamError {
	ue := &sampler.UpstreamError{Provider: p.name, Err: err}
	var ne net.Error
	switch cerr := ctx.Err(); {
	case cerr != nil:
		if !errors.Is(err, cerr) {
			ue.Err = fmt.Errorf("%w: %w", cerr, err)
		}
		if errors.Is(cerr, context.Canceled) {
			ue.Message = "request cancelled"
		} else {
			ue.Timeout = true
			ue.Message = "deadline exceeded before the answer arrived"
		}
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		ue.Timeout = true
		ue.Message = "no answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		ue.Message = "connection refused; is Ollama running?"
	default:
		ue.Message = "connection failed"
	}
	return ue
}

// statusError turns a non-2xx response into an UpstreamError, with the
// message of Ollama's {"error": "..."} body and the Retry-After header.
func (p *Provider) statusError(resp *http.Response) *sampler.UpstreamError {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ue := &sampler.UpstreamError{Provider: p.name, Status: resp.StatusCode, Message: errorMessage(data, resp.StatusCode)}
	if d, ok := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		ue.RetryAfter = d
	}
	return ue
}

// errorMessage returns the "error" member of an error body, else the body
// itself when it is short text, else the status text; at most maxMessage
// runes.
func errorMessage(body []byte, status int) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && strings.TrimSpace(e.Error) != "" {
		return truncate(strings.TrimSpace(e.Error))
	}
	if text := strings.TrimSpace(string(body)); text != "" && utf8.ValidString(text) && !strings.HasPrefix(text, "<") {
		return truncate(text)
	}
	return http.StatusText(status)
}

// truncate cuts s to maxMessage runes.
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= maxMessage {
		return s
	}
	r := []rune(s)
	return string(r[:maxMessage])
}
