package sampler

import (
	"net/http"
	"time"
)

// MaxIdleConns is the number of idle connections a provider's client keeps
// to its upstream. net/http's default of 2 makes every other call of a
// loaded gateway dial anew, and leaves thousands of sockets in TIME_WAIT.
const MaxIdleConns = 256

// NewHTTPClient returns a client for provider calls: net/http's default
// transport settings (proxy from the environment, keep-alives, HTTP/2),
// never http.DefaultClient itself, a pool of MaxIdleConns idle
// connections, and ResponseHeaderTimeout set so that an upstream that
// accepts the connection and then says nothing fails in time. Providers use
// it when they are not given a client.
func NewHTTPClient(responseHeaderTimeout time.Duration) *http.Client {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.MaxIdleConns = MaxIdleConns
	t.MaxIdleConnsPerHost = MaxIdleConns
	t.ResponseHeaderTimeout = responseHeaderTimeout
	return &http.Client{Transport: t}
}
