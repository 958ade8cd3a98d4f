package handlers

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/access"
)

// TestSlowBodiesTakeNoPlace sends more bodies than the in-flight cap has
// places, each stalled after its first byte (issue 27, point 3): a sampling
// request takes a place only once its body has been read, so fast callers
// are still served, and a body that does not arrive within the body
// timeout gets a 408 and frees its connection.
func TestSlowBodiesTakeNoPlace(t *testing.T) {
	const places = 2
	g, err := access.New(access.Options{InFlightSamples: places})
	if err != nil {
		t.Fatal(err)
	}
	s := startStackWith(t, stackOptions{cfg: func(c *Config) { c.Access, c.BodyTimeout = g, 500*time.Millisecond }})
	type slowConn struct {
		net.Conn
		r *bufio.Reader
	}
	var slow []slowConn
	for i := range places + 2 {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		// The server says 100 Continue once the handler reads the body:
		// from then on the request is in the handler, stalled.
		fmt.Fprintf(c, "POST /v1/sample HTTP/1.1\r\nHost: sampled\r\nContent-Type: application/json\r\n"+
			"Content-Length: 100000\r\nExpect: 100-continue\r\n\r\n")
		sc := slowConn{Conn: c, r: bufio.NewReader(c)}
		if line, err := sc.r.ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
			t.Fatalf("slow sender %d: %q %v, want 100 Continue", i, line, err)
		}
		if _, err := sc.r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("{")); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, sc)
	}
	for range 3 {
		if status, _, out := s.post(t, "/v1/sample", `{"prompt":"a"}`); status != http.StatusOK {
			t.Fatalf("a fast caller while slow senders stall: %d %v", status, out)
		}
	}
	for i, sc := range slow {
		resp, err := http.ReadResponse(sc.r, nil)
		if err != nil {
			t.Fatalf("slow sender %d: no answer within the body timeout: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || problemType(t, b) != problemBase+"request-timeout" {
			t.Errorf("slow sender %d: %d %s, want a 408 request-timeout problem", i, resp.StatusCode, b)
		}
	}
	if n := g.InFlight(); n != 0 {
		t.Errorf("%d places held after every request ended", n)
	}
}

// send posts body with the given request headers and returns the status
// and the problem's detail and error messages.
func (s *stack) send(t *testing.T, path string, body []byte, header map[string]string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, raw)
	}
	checkResponse(t, req, body, resp, raw)
	return resp.StatusCode, resp.Header, out
}

// TestBodyEncodings checks what a body in another content coding or
// charset, or not UTF-8, gets (issue 27, points 8 and 11): a 415 naming the
// coding or charset, a 400 naming the byte.
func TestBodyEncodings(t *testing.T) {
	s := startStack(t, 0)
	bodies := map[string]string{
		"/v1/sample":   `{"prompt":"café"}`,
		"/v1/messages": `{"maxTokens":5,"messages":[{"role":"user","content":{"type":"text","text":"café"}}]}`,
	}
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		_ = w.Close()
		return b.Bytes()
	}
	utf16 := func(s string) []byte {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r), byte(r>>8))
		}
		return b
	}
	latin1 := func(s string) []byte { return []byte(strings.ReplaceAll(s, "é", "\xe9")) }
	for path, body := range bodies {
		tests := []struct {
			name       string
			body       []byte
			header     map[string]string
			wantStatus int
			want       string // in the detail
		}{
			{"gzip", gz(body), map[string]string{"Content-Encoding": "gzip"}, 415, "gzip"},
			{"deflate", gz(body), map[string]string{"Content-Encoding": "deflate"}, 415, "deflate"},
			{"utf-16", utf16(body), map[string]string{"Content-Type": "application/json; charset=utf-16"}, 415, "utf-16"},
			{"latin-1 charset", latin1(body), map[string]string{"Content-Type": "application/json; charset=ISO-8859-1"}, 415, "ISO-8859-1"},
			{"invalid UTF-8", latin1(body), nil, 400, fmt.Sprintf("byte %d", strings.Index(body, "é"))},
			{"UTF-8 said", []byte(body), map[string]string{"Content-Type": "application/json; charset=UTF-8"}, 200, ""},
			{"identity", []byte(body), map[string]string{"Content-Encoding": "identity"}, 200, ""},
		}
		for _, tt := range tests {
			t.Run(path+" "+tt.name, func(t *testing.T) {
				status, h, out := s.send(t, path, tt.body, tt.header)
				if status != tt.wantStatus {
					t.Fatalf("status %d, want %d: %v", status, tt.wantStatus, out)
				}
				if detail, _ := out["detail"].(string); !strings.Contains(detail, tt.want) {
					t.Errorf("detail %q does not name %q", detail, tt.want)
				}
				if tt.name == "gzip" && h.Get("Accept-Encoding") != "identity" {
					t.Errorf("Accept-Encoding %q, want identity", h.Get("Accept-Encoding"))
				}
			})
		}
	}
}

// TestRequestBounds checks the bounds of what a request asks (issue 27,
// point 11): maxTokens has a ceiling, and tool names are what both MCP and
// the providers take; each refusal is a 400 at the member's path.
func TestRequestBounds(t *testing.T) {
	s := startStack(t, 0)
	tool := func(name string) string {
		b, _ := json.Marshal(name)
		return `[{"name":` + string(b) + `,"inputSchema":{"type":"object"}}]`
	}
	const msgs = `"messages":[{"role":"user","content":{"type":"text","text":"a"}}]`
	tests := []struct {
		name, sample, messages string
		wantPath, want         string // want: in the error's message; "" for a 200
	}{
		{"maxTokens 2^62", `{"prompt":"a","maxTokens":4611686018427387904}`, `{"maxTokens":4611686018427387904,` + msgs + `}`,
			"/maxTokens", fmt.Sprint(1 << 20)},
		{"maxTokens at the ceiling", `{"prompt":"a","maxTokens":1048576}`, `{"maxTokens":1048576,` + msgs + `}`, "", ""},
		{"tool name with a newline", `{"prompt":"a","tools":` + tool("get\nweather") + `}`, `{"maxTokens":5,` + msgs + `,"tools":` + tool("get\nweather") + `}`,
			"/tools/0/name", "letters"},
		{"tool name with U+202E", `{"prompt":"a","tools":` + tool("get\u202eweather") + `}`, `{"maxTokens":5,` + msgs + `,"tools":` + tool("get\u202eweather") + `}`,
			"/tools/0/name", "letters"},
		{"tool name event:", `{"prompt":"a","tools":` + tool("event: x") + `}`, `{"maxTokens":5,` + msgs + `,"tools":` + tool("event: x") + `}`,
			"/tools/0/name", "letters"},
		{"tool name of 65 characters", `{"prompt":"a","tools":` + tool(strings.Repeat("a", 65)) + `}`,
			`{"maxTokens":5,` + msgs + `,"tools":` + tool(strings.Repeat("a", 65)) + `}`, "/tools/0/name", "64"},
		{"tool name of 64 characters", `{"prompt":"a","tools":` + tool(strings.Repeat("a", 64)) + `}`,
			`{"maxTokens":5,` + msgs + `,"tools":` + tool(strings.Repeat("a", 64)) + `}`, "", ""},
		{"tool name with _ and -", `{"prompt":"a","tools":` + tool("get_weather-2") + `}`,
			`{"maxTokens":5,` + msgs + `,"tools":` + tool("get_weather-2") + `}`, "", ""},
	}
	for _, tt := range tests {
		for path, body := range map[string]string{"/v1/sample": tt.sample, "/v1/messages": tt.messages} {
			t.Run(path+" "+tt.name, func(t *testing.T) {
				status, _, out := s.send(t, path, []byte(body), nil)
				if tt.wantPath == "" {
					if status != http.StatusOK {
						t.Errorf("status %d, want 200: %v", status, out)
					}
					return
				}
				if status != http.StatusBadRequest {
					t.Fatalf("status %d, want 400: %v", status, out)
				}
				errs, _ := out["errors"].([]any)
				for _, e := range errs {
					fe := e.(map[string]any)
					if fe["path"] == tt.wantPath && strings.Contains(fe["message"].(string), tt.want) {
						return
					}
				}
				t.Errorf("no error at %s saying %q: %v", tt.wantPath, tt.want, out["errors"])
			})
		}
	}
}
