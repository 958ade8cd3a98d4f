package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kaptinlin/jsonschema"
	"github.com/prometheus/client_golang/prometheus"
)

// contractFloor is the floor gateway doing, by the least code, what
// sampled's contract asks of every plain and schema request beside the
// floor's own work: an X-Request-Id, a place under an in-flight cap, a
// bounded body decoded strictly and checked, a per-call deadline, the
// whole reply read (text, stop reason, usage), the answer in sampled's
// shape with its cost header, the parsed answer validated against the
// schema, one JSON log line per request through cmd/server's LogWriter,
// and the Prometheus series sampled updates for such a request. It has
// none of sampled's layers: no routing, middleware chain, sampling
// service, retries, provider interface or wire-type conversions.
//
// bench -side -contract measures it in sampled's place, beside the floor:
// what the contract itself costs over the least code, on this machine.
type contractFloor struct {
	up      *floorGateway // the floor's upstream URL and client
	slots   chan struct{}
	log     *slog.Logger
	schemas sync.Map // schema text → *jsonschema.Schema

	requests  *prometheus.CounterVec   // route, method, status
	duration  *prometheus.HistogramVec // route, method
	samples   *prometheus.CounterVec   // endpoint, mode, model, outcome
	overhead  prometheus.Histogram
	upstreamD prometheus.Observer
	inTokens  prometheus.Counter
	outTokens prometheus.Counter
}

// contractRequest is the part of /v1/sample's body the contract floor
// accepts; any other member is refused, as sampled refuses it.
type contractRequest struct {
	Prompt    *string         `json:"prompt"`
	MaxTokens *int            `json:"maxTokens"`
	Schema    json.RawMessage `json:"schema"`
}

// contractReply is the part of a chat completion the contract floor reads.
type contractReply struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

type contractBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type contractUsage struct {
	InputTokens  int     `json:"inputTokens"`
	OutputTokens int     `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
	Unpriced     bool    `json:"unpriced"`
}

// contractAnswer is sampled's answer to a plain or schema request.
type contractAnswer struct {
	Model      string          `json:"model"`
	Provider   string          `json:"provider"`
	Role       string          `json:"role"`
	Content    []contractBlock `json:"content"`
	Text       string          `json:"text"`
	StopReason string          `json:"stopReason"`
	Usage      contractUsage   `json:"usage"`
	Attempts   int             `json:"attempts"`
	DurationMs int64           `json:"durationMs"`
	Parsed     json.RawMessage `json:"parsed,omitempty"`
}

func newContractFloor(chatURL string, logs io.Writer) *contractFloor {
	reg := prometheus.NewRegistry()
	f := &contractFloor{
		up:       newFloorGateway(chatURL),
		slots:    make(chan struct{}, 4096), // sampled's cap in this bench (newSampled)
		log:      slog.New(slog.NewJSONHandler(logs, nil)),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total"}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "http_request_duration_seconds"}, []string{"route", "method"}),
		samples:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "samples_total"}, []string{"endpoint", "mode", "model", "outcome"}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "overhead_seconds"}),
	}
	up := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "upstream_duration_seconds"}, []string{"provider", "model", "outcome"})
	tokens := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tokens_total"}, []string{"provider", "model", "direction"})
	reg.MustRegister(f.requests, f.duration, f.samples, f.overhead, up, tokens)
	f.upstreamD = up.WithLabelValues("openai", "openai/gpt-4o-mini", "ok")
	f.inTokens = tokens.WithLabelValues("openai", "openai/gpt-4o-mini", "input")
	f.outTokens = tokens.WithLabelValues("openai", "openai/gpt-4o-mini", "output")
	return f
}

func (f *contractFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-Id")
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Request-Id", id)
	status, mode, outcome := f.serve(w, r)
	d := time.Since(start)
	f.requests.WithLabelValues("/v1/sample", r.Method, strconv.Itoa(status)).Inc()
	f.duration.WithLabelValues("/v1/sample", r.Method).Observe(d.Seconds())
	f.log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("requestId", id), slog.String("method", r.Method),
		slog.String("route", "/v1/sample"), slog.Int("status", status), slog.Float64("durationMs", float64(d.Microseconds())/1000),
		slog.String("endpoint", "sample"), slog.String("mode", mode), slog.String("outcome", outcome),
		slog.String("provider", "openai"), slog.String("model", "gpt-4o-mini"), slog.Int("attempts", 1))
}

// serve answers the request and says its status, mode and outcome.
func (f *contractFloor) serve(w http.ResponseWriter, r *http.Request) (int, string, string) {
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	default:
		return contractProblem(w, http.StatusTooManyRequests, "too many samples in flight"), "", "rate_limited"
	}
	start := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return contractProblem(w, http.StatusBadRequest, err.Error()), "", "invalid"
	}
	var in contractRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return contractProblem(w, http.StatusBadRequest, err.Error()), "", "invalid"
	}
	if in.Prompt == nil || *in.Prompt == "" || (in.MaxTokens != nil && *in.MaxTokens < 1) {
		return contractProblem(w, http.StatusBadRequest, "give a prompt and a positive maxTokens"), "", "invalid"
	}
	mode := "plain"
	var schema *jsonschema.Schema
	if len(in.Schema) > 0 {
		mode = "schema"
		if schema, err = f.compile(in.Schema); err != nil {
			return contractProblem(w, http.StatusBadRequest, err.Error()), mode, "invalid"
		}
	}
	fr := floorRequest{Prompt: *in.Prompt, Schema: in.Schema}
	if in.MaxTokens != nil {
		fr.MaxTokens = *in.MaxTokens
	}
	reqBody, err := json.Marshal(chatFor(fr))
	if err != nil {
		return contractProblem(w, http.StatusInternalServerError, err.Error()), mode, "error"
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.up.upstream, bytes.NewReader(reqBody))
	if err != nil {
		return contractProblem(w, http.StatusInternalServerError, err.Error()), mode, "error"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	t0 := time.Now()
	resp, err := f.up.client.Do(req)
	if err != nil {
		return contractProblem(w, http.StatusBadGateway, err.Error()), mode, "upstream_error"
	}
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return contractProblem(w, http.StatusBadGateway, fmt.Sprintf("upstream: status %d", resp.StatusCode)), mode, "upstream_error"
	}
	var cr contractReply
	if err := json.Unmarshal(reply, &cr); err != nil || len(cr.Choices) == 0 {
		return contractProblem(w, http.StatusBadGateway, "upstream: no answer"), mode, "upstream_error"
	}
	up := time.Since(t0)
	f.upstreamD.Observe(up.Seconds())
	f.inTokens.Add(float64(cr.Usage.PromptTokens))
	f.outTokens.Add(float64(cr.Usage.CompletionTokens))
	text := cr.Choices[0].Message.Content
	stop := "endTurn"
	if cr.Choices[0].FinishReason == "length" {
		stop = "maxTokens"
	}
	a := contractAnswer{Model: cr.Model, Provider: "openai", Role: "assistant", Content: []contractBlock{{Type: "text", Text: text}},
		Text: text, StopReason: stop, Attempts: 1, DurationMs: time.Since(start).Milliseconds(),
		Usage: contractUsage{InputTokens: cr.Usage.PromptTokens, OutputTokens: cr.Usage.CompletionTokens, Unpriced: true}}
	if schema != nil {
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil || !schema.Validate(v).IsValid() {
			return contractProblem(w, http.StatusBadGateway, "the answer does not match the schema"), mode, "invalid_answer"
		}
		a.Parsed = json.RawMessage(text)
	}
	f.samples.WithLabelValues("sample", mode, "openai/gpt-4o-mini", "ok").Inc()
	f.overhead.Observe((time.Since(start) - up).Seconds())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Sampled-Cost-Usd", "0")
	_ = json.NewEncoder(w).Encode(a)
	return http.StatusOK, mode, "ok"
}

// compile compiles a schema once.
func (f *contractFloor) compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	if s, ok := f.schemas.Load(string(raw)); ok {
		return s.(*jsonschema.Schema), nil
	}
	s, err := jsonschema.NewCompiler().Compile(raw)
	if err != nil {
		return nil, err
	}
	f.schemas.Store(string(raw), s)
	return s, nil
}

func contractProblem(w http.ResponseWriter, status int, detail string) int {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
	return status
}
