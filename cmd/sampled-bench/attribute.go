package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// bucketRule names the samples whose stack holds a function matching re.
type bucketRule struct {
	name string
	re   *regexp.Regexp
}

// attributionRules returns the buckets of the side-by-side analysis. A
// sample's stack is read from the leaf towards the root, and the first
// frame that matches a specific rule names its bucket, so that allocation,
// GC assists and system calls are charged to the code that caused them.
// Stacks that match no specific rule go to the first fallback rule that
// matches any of their frames.
func attributionRules() (specific, fallback []bucketRule) {
	rule := func(name, re string) bucketRule { return bucketRule{name, regexp.MustCompile(re)} }
	specific = []bucketRule{
		rule("GC (background mark, assists)", `^runtime\.(gcBgMarkWorker|gcAssistAlloc|bgsweep|bgscavenge)`),
		rule("request id (crypto/rand, hex)", `^crypto/|^encoding/hex\.`),
		rule("metrics (prometheus)", `prometheus`),
		rule("logging (slog line, log attrs)", `^log/slog\.|handlers\.addLog|handlers\.logSample`),
		rule("schema: compile cache and validation", `kaptinlin/jsonschema|sampler\.\(\*SchemaCache\)|sampler\.\(\*Schema\)|sampler\.\(\*Service\)\.parse|sampler\.checkRequest`),
		rule("upstream: dial new connections", `^net/http\.\(\*Transport\)\.(dialConn|dialConnFor|startDialConnForLocked)`),
		rule("upstream: close or pool connections", `^net/http\.\(\*persistConn\)\.(close|closeLocked|closeConnIfStillIdle)|^net/http\.\(\*Transport\)\.(removeIdleConn|tryPutIdleConn|putOrCloseIdleConn)`),
		rule("upstream: transport read loop (response)", `^net/http\.\(\*persistConn\)\.readLoop`),
		rule("upstream: transport write loop (request)", `^net/http\.\(\*persistConn\)\.writeLoop`),
		rule("upstream: client round trip", `^net/http\.\(\*Client\)\.|^net/http\.\(\*Transport\)\.(roundTrip|RoundTrip|getConn|queueForIdleConn)|^net/http\.\(\*persistConn\)\.roundTrip|^net/http\.(send|NewRequest)`),
		rule("go-openai: decode response", `go-openai\.decodeResponse|go-openai\.\(\*ChatCompletion`),
		rule("go-openai: build and send (stub, headers)", `go-openai`),
		rule("adapter: strict-mode check (decodes the schema per call)", `sampler/openai\.(strictCompatible|strictNode|isObjectSchema)`),
		rule("adapter: encode request", `sampler/openai\.\(\*Provider\)\.encodeRequest`),
		rule("adapter: other (doer, response mapping)", `sampler/openai\.`),
		rule("handler: decode body (DisallowUnknownFields)", `handlers\.\(\*server\)\.decodeBody|handlers\.decodeItems`),
		rule("handler: encode response (writeJSON)", `handlers\.\(\*server\)\.writeJSON|sampler\.Content\.MarshalJSON`),
		rule("handler: body to params", `handlers\.\(\*sampleBody\)\.params`),
		rule("sampler: service (select, retry, timeout ctx)", `sampled/internal/sampler\.|sampled/internal/retry\.`),
		rule("handlers: middleware own (ids, ctx, status)", `sampled/internal/handlers\.`),
		rule("routing (net/http.ServeMux)", `^net/http\.\(\*ServeMux\)|^net/http\.\(\*routingNode\)|^net/http\.\(\*pattern\)`),
		rule("floor handler (encoding/json, its own code)", `^main\.\(\*floorGateway\)`),
	}
	fallback = []bucketRule{
		rule("net/http server (read request, write response)", `^net/http\.`),
		rule("runtime: scheduler, netpoll, other", `^runtime\.|^internal/runtime|^internal/poll|^syscall\.`),
	}
	return specific, fallback
}

// trace is one stack of a CPU profile with its samples' time, leaf first.
type trace struct {
	value time.Duration
	stack []string
}

// parseTraces reads the output of `go tool pprof -traces`.
func parseTraces(r io.Reader) ([]trace, error) {
	var (
		out []trace
		cur *trace
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------") {
			if cur != nil && len(cur.stack) > 0 {
				out = append(out, *cur)
			}
			cur = &trace{}
			continue
		}
		f := strings.Fields(line)
		if cur == nil || len(f) == 0 {
			continue // the header, or a blank line
		}
		if len(cur.stack) == 0 && cur.value == 0 {
			if len(f) < 2 {
				return nil, fmt.Errorf("traces: %q: want a time and a function", line)
			}
			d, err := time.ParseDuration(f[0])
			if err != nil {
				return nil, fmt.Errorf("traces: %q: %w", line, err)
			}
			cur.value, f = d, f[1:]
		}
		cur.stack = append(cur.stack, f[0])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil && len(cur.stack) > 0 {
		out = append(out, *cur)
	}
	return out, nil
}

// bucketOf names the bucket of a stack, leaf first.
func bucketOf(stack []string, specific, fallback []bucketRule) string {
	for _, fn := range stack {
		for _, r := range specific {
			if r.re.MatchString(fn) {
				return r.name
			}
		}
	}
	for _, r := range fallback {
		if slices.ContainsFunc(stack, r.re.MatchString) {
			return r.name
		}
	}
	return "other"
}

// share is a bucket's part of a profile.
type share struct {
	bucket string
	value  time.Duration
}

// attribute sums the traces by bucket, the largest first.
func attribute(traces []trace, specific, fallback []bucketRule) []share {
	sums := map[string]time.Duration{}
	for _, t := range traces {
		sums[bucketOf(t.stack, specific, fallback)] += t.value
	}
	var out []share
	for b, v := range sums {
		out = append(out, share{b, v})
	}
	slices.SortFunc(out, func(a, b share) int {
		if a.value != b.value {
			return int(b.value - a.value)
		}
		return strings.Compare(a.bucket, b.bucket)
	})
	return out
}

// runAttribute prints the buckets of the traces on in: their percentage
// of the samples and, if perRequest (µs of CPU per request, as measured
// while profiling) is positive, their µs per request.
func runAttribute(in io.Reader, perRequest float64, stdout io.Writer) error {
	traces, err := parseTraces(in)
	if err != nil {
		return err
	}
	if len(traces) == 0 {
		return fmt.Errorf("no traces; pipe in the output of go tool pprof -traces")
	}
	specific, fallback := attributionRules()
	shares := attribute(traces, specific, fallback)
	var total time.Duration
	for _, s := range shares {
		total += s.value
	}
	for _, s := range shares {
		frac := float64(s.value) / float64(total)
		if perRequest > 0 {
			fmt.Fprintf(stdout, "%6.1fµs ", perRequest*frac)
		}
		fmt.Fprintf(stdout, "%5.1f%%  %s\n", 100*frac, s.bucket)
	}
	fmt.Fprintf(stdout, "%s of samples\n", total)
	return nil
}
