package sampler

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
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
	return &http.Client{Transport: replyLimit{t}}
}

// MaxReplyBytes is the most a provider's client reads of one reply: a
// larger one fails with ErrReplyTooLarge instead of filling memory.
const MaxReplyBytes = 16 << 20

// ErrReplyTooLarge is a reply longer than MaxReplyBytes.
var ErrReplyTooLarge = fmt.Errorf("the reply exceeds %d MiB", MaxReplyBytes>>20)

// replyLimit is a RoundTripper whose replies are cut at MaxReplyBytes.
type replyLimit struct{ next *http.Transport }

// Base returns the transport underneath, whose settings tests check.
func (l replyLimit) Base() *http.Transport { return l.next }

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

// V1Options make the JSON v2 decoder read JSON with encoding/json's
// semantics (names matched without regard to case, duplicate names and
// invalid UTF-8 accepted, null leaving a value as it is, ...) in one pass,
// its errors in the v2 form, which carry the JSON Pointer of what failed.
// Provider replies (DecodeReply) and request bodies are read with them.
var V1Options = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))

// DecodeReply decodes the body of a provider's reply into v as
// json.Unmarshal would, in one pass instead of encoding/json's two (a
// validity scan, then the decoding): every answer goes through it.
// Its errors name the byte or the JSON Pointer of what could not be read,
// never a Go type.
func DecodeReply(data []byte, v any) error {
	err := jsonv2.Unmarshal(data, v, V1Options)
	if err == nil {
		return nil
	}
	var (
		syn *jsontext.SyntacticError
		sem *jsonv2.SemanticError
	)
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("not valid JSON at byte %d: %w", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem) && sem.Err != nil:
		return fmt.Errorf("%s: %w", pointerOrRoot(sem.JSONPointer), sem.Err)
	case errors.As(err, &sem):
		return fmt.Errorf("%s: unexpected JSON %s", pointerOrRoot(sem.JSONPointer), sem.JSONKind)
	}
	return err
}

func pointerOrRoot(p jsontext.Pointer) string {
	if p == "" {
		return "/"
	}
	return string(p)
}
