package sampler

import (
	"net/http"
	"time"
)

// NewHTTPClient returns a client for provider calls: net/http's default
// transport settings (proxy from the environment, keep-alives, HTTP/2),
// never http.DefaultClient itself, with ResponseHeaderTimeout set so that
// an upstream that accepts the connection and then says nothing fails in
// time. Providers use it when they are not given a client.
func NewHTTPClient(responseHeaderTimeout time.Duration) *http.Client {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.ResponseHeaderTimeout = responseHeaderTimeout
	return &http.Client{Transport: t}
}
