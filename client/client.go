// Package client is a Go client of sampled, the service that gives any
// program LLM sampling the way MCP defines it (sampling/createMessage) over
// REST and Server-Sent Events.
//
// A Client calls the service's endpoints: Sample (POST /v1/sample, plain,
// schema or tools mode), Messages (POST /v1/messages, MCP's
// CreateMessageRequest params in and CreateMessageResult out), the
// guaranteed helpers SampleSchema and SampleTools (generic functions whose
// results carry typed values), and the tool loops: StartLoop, Loop,
// CancelLoop, ListLoops and Events, whose iterator follows a loop's event
// stream and resumes it after a dropped connection.
//
// Every answer with an error status is returned as a *Problem, the RFC 9457
// problem document the service sent, or as a *ValidationError when a
// guaranteed helper ran out of attempts. Transport failures and context
// errors are returned wrapped, as net/http gives them.
//
// The types of this package mirror the service's HTTP contract
// (api/openapi.yaml): messages and content blocks as in MCP, tools, tool
// choice, results, problems, loop runs and events.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// DefaultUserAgent is the User-Agent a Client sends unless WithUserAgent
// sets another.
const DefaultUserAgent = "sampled-go-client/0.1"

// Client calls a sampled service. It is safe for concurrent use. Create it
// with New.
type Client struct {
	base      *url.URL
	http      *http.Client
	apiKey    string
	userAgent string
	// firstBackoff is the first wait of Events before reconnecting after
	// a failure; tests shorten it.
	firstBackoff time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as a bearer token (Authorization: Bearer key) with
// every request. Empty means no Authorization header.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient makes the Client send its requests with hc. nil means a
// new http.Client with net/http's default transport and no timeout: a
// loop's event stream lasts as long as the loop, so bound requests with
// their context rather than with http.Client.Timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header. Empty means DefaultUserAgent.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a Client of the service at baseURL (e.g.
// "http://127.0.0.1:8080"; a path, as behind a reverse proxy, is kept and
// the API's paths are appended to it). Without options it sends no API key,
// uses a new http.Client and DefaultUserAgent.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http:// or https:// and a host", baseURL)
	}
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, firstBackoff: firstBackoff}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent
	}
	return c, nil
}

// newRequest builds a request of the API at path (below the base URL) with
// query and, when in is not nil, in as its JSON body.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, in any) (*http.Request, error) {
	u := c.base.JoinPath(path) // path is escaped
	u.RawQuery = query.Encode()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("client: encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// do sends a JSON request and decodes a 2xx answer's JSON body into out
// (when out is not nil). An error status is a *Problem or a
// *ValidationError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	req, err := c.newRequest(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer func() {
		// Drain what is left so that the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errorFrom(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("client: %s %s: %w", method, path, errors.Join(ctx.Err(), err))
		}
		return fmt.Errorf("client: %s %s: decode the answer: %w", method, path, err)
	}
	return nil
}
