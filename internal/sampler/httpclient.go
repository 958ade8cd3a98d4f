package sampler

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sampled/sampled/internal/telemetry"
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
	return &http.Client{Transport: telemetry.Transport(replyLimit{t})}
}

// MaxReplyBytes is the most a provider's client reads of one reply: a
// larger one fails with ErrReplyTooLarge instead of filling memory.
const MaxReplyBytes = 16 << 20

// ErrReplyTooLarge is a reply longer than MaxReplyBytes.
var ErrReplyTooLarge = fmt.Errorf("the reply exceeds %d MiB", MaxReplyBytes>>20)

// replyLimit is a RoundTripper whose replies are cut at MaxReplyBytes.
type replyLimit struct{ next *http.Transport }

func (l replyLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	left := int64(MaxReplyBytes)
	if resp.ContentLength > MaxReplyBytes {
		left = 0 // the first read fails: nothing is read of it
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: left}
	return resp, nil
}

// LimitReply bounds body at MaxReplyBytes, as the clients of NewHTTPClient
// do, for a reader of a body that a given client may not have bounded.
// A body it bounds already is returned as it is.
func LimitReply(body io.ReadCloser) io.ReadCloser {
	if _, ok := body.(*limitedBody); ok {
		return body
	}
	return &limitedBody{ReadCloser: body, left: MaxReplyBytes}
}

// limitedBody fails with ErrReplyTooLarge once it has read its limit and
// more remains. The adapters see the error where they read the body, with
// the reply's status.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n > 0 || !errors.Is(err, io.EOF) {
			if n > 0 {
				return 0, ErrReplyTooLarge
			}
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
