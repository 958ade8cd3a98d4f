package sampler

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestReplyLimit: a provider's client reads at most MaxReplyBytes of a
// reply, whether the reply declares its length or streams it.
func TestReplyLimit(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		declared bool
		wantErr  bool
	}{
		{"declared, at the limit", MaxReplyBytes, true, false},
		{"declared, over the limit", MaxReplyBytes + 1, true, true},
		{"streamed, at the limit", MaxReplyBytes, false, false},
		{"streamed, over the limit", MaxReplyBytes + 1, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tt.declared {
					w.(http.Flusher).Flush() // chunked: no Content-Length
				}
				_, _ = io.Copy(w, strings.NewReader(strings.Repeat("x", tt.size)))
			}))
			defer srv.Close()
			c := NewHTTPClient(0)
			defer c.CloseIdleConnections()
			var n int64
			resp, err := c.Get(srv.URL)
			if err == nil {
				n, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			if tt.wantErr != errors.Is(err, ErrReplyTooLarge) || n > MaxReplyBytes {
				t.Errorf("read %d bytes, err %v; want too large: %v", n, err, tt.wantErr)
			}
		})
	}
}

// TestNewHTTPClient: the client's transport keeps a pool of idle
// connections sized for a gateway, and waits for a reply's headers as long
// as it is told.
func TestNewHTTPClient(t *testing.T) {
	l, ok := NewHTTPClient(time.Minute).Transport.(replyLimit)
	if !ok {
		t.Fatalf("transport %T", NewHTTPClient(time.Minute).Transport)
	}
	if got := []any{l.next.ResponseHeaderTimeout, l.next.MaxIdleConns, l.next.MaxIdleConnsPerHost}; !reflect.DeepEqual(got, []any{time.Minute, MaxIdleConns, MaxIdleConns}) {
		t.Errorf("ResponseHeaderTimeout, MaxIdleConns, MaxIdleConnsPerHost = %v", got)
	}
}
