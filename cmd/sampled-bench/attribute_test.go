package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const tracesSample = `File: sb
Type: cpu
Duration: 5s, Total samples = 1.30s (26.00%)
-----------+-------------------------------------------------------
     150ms   internal/runtime/syscall/linux.Syscall6
             internal/runtime/syscall/linux.EpollCtl (inline)
             net.(*netFD).connect
             net/http.(*Transport).dialConn
             net/http.(*Transport).dialConnFor
-----------+-------------------------------------------------------
     1.05s   runtime.mallocgc
             encoding/json.(*decodeState).object
             github.com/sashabaranov/go-openai.decodeResponse
             github.com/sashabaranov/go-openai.(*Client).sendRequest
             github.com/sampled/sampled/internal/handlers.(*server).instrument-fm.(*server).instrument.func1
             net/http.(*conn).serve
-----------+-------------------------------------------------------
     100ms   internal/runtime/syscall/linux.Syscall6
             syscall.write
             bufio.(*Writer).Flush
             net/http.(*response).finishRequest
             net/http.(*conn).serve
`

func TestParseTraces(t *testing.T) {
	got, err := parseTraces(strings.NewReader(tracesSample))
	if err != nil {
		t.Fatal(err)
	}
	var values []time.Duration
	var leaves, roots []string
	for _, tr := range got {
		values = append(values, tr.value)
		leaves = append(leaves, tr.stack[0])
		roots = append(roots, tr.stack[len(tr.stack)-1])
	}
	want := [][]string{
		{"internal/runtime/syscall/linux.Syscall6", "runtime.mallocgc", "internal/runtime/syscall/linux.Syscall6"},
		{"net/http.(*Transport).dialConnFor", "net/http.(*conn).serve", "net/http.(*conn).serve"},
	}
	if diff := cmp.Diff(want, [][]string{leaves, roots}); diff != "" {
		t.Errorf("leaves and roots (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{150 * time.Millisecond, 1050 * time.Millisecond, 100 * time.Millisecond}, values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}

	if _, err := parseTraces(strings.NewReader("-----------+---\n  lots   main.f\n")); err == nil {
		t.Error("a time that does not parse: no error")
	}
}

// TestBucketOf: the frame nearest the leaf that a specific rule matches
// names the bucket, whatever runtime or system-call frames lie below it;
// the fallback rules apply only when no specific rule matches, in order.
func TestBucketOf(t *testing.T) {
	specific, fallback := attributionRules()
	tests := []struct {
		name  string
		stack []string
		want  string
	}{
		{"allocation charged to its caller",
			[]string{"runtime.mallocgc", "encoding/json.(*decodeState).object", "github.com/sashabaranov/go-openai.decodeResponse", "github.com/sampled/sampled/internal/handlers.(*server).serveSample"},
			"go-openai: decode response"},
		{"nearest the leaf wins",
			[]string{"log/slog.(*Logger).LogAttrs", "github.com/sampled/sampled/internal/handlers.(*server).instrument-fm.(*server).instrument.func1", "net/http.(*ServeMux).ServeHTTP"},
			"logging (slog line, log attrs)"},
		{"routing", []string{"runtime.mallocgc", "net/http.(*routingNode).matchPath", "net/http.(*ServeMux).findHandler", "net/http.(*ServeMux).ServeHTTP", "net/http.serverHandler.ServeHTTP"},
			"routing (net/http.ServeMux)"},
		{"dial", []string{"internal/runtime/syscall/linux.Syscall6", "net.(*netFD).connect", "net/http.(*Transport).dialConn"},
			"upstream: dial new connections"},
		{"GC assist in a handler", []string{"runtime.scanobject", "runtime.gcAssistAlloc", "runtime.mallocgc", "github.com/sampled/sampled/internal/handlers.(*server).writeJSON"},
			"GC (background mark, assists)"},
		{"net/http before the runtime", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.write", "net/http.(*response).finishRequest", "net/http.(*conn).serve"},
			"net/http server (read request, write response)"},
		{"scheduler", []string{"runtime.findRunnable", "runtime.schedule", "runtime.mcall"}, "runtime: scheduler, netpoll, other"},
		{"floor", []string{"encoding/json.Marshal", "main.(*floorGateway).ServeHTTP", "net/http.(*conn).serve"}, "floor handler (encoding/json, its own code)"},
		{"nothing known", []string{"main.elsewhere"}, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, bucketOf(tt.stack, specific, fallback)); diff != "" {
				t.Errorf("bucket (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunAttribute(t *testing.T) {
	var out bytes.Buffer
	if err := runAttribute(strings.NewReader(tracesSample), 130, &out); err != nil {
		t.Fatal(err)
	}
	want := ` 105.0µs  80.8%  go-openai: decode response
  15.0µs  11.5%  upstream: dial new connections
  10.0µs   7.7%  net/http server (read request, write response)
1.3s of samples
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if err := runAttribute(strings.NewReader("File: sb\n"), 0, &out); err == nil {
		t.Error("no traces: no error")
	}
}
