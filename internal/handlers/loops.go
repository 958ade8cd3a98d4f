package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/runs"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/tools"
)

// Loops starts loop runs.
type Loops interface {
	Start(ctx context.Context, spec loop.Spec) (string, error)
}

// Runs reads runs, follows their event logs and asks for their
// cancellation (see runs.Store).
type Runs interface {
	Snapshot(ctx context.Context, id string) (json.RawMessage, error)
	List(ctx context.Context, q runs.ListQuery) (runs.Page, error)
	Subscribe(ctx context.Context, id string, after int64) (runs.Subscription, error)
	Cancel(ctx context.Context, id string) error
}

// Tools lists the tools loops may use and their servers.
type Tools interface {
	Tools() []tools.Tool
	Status() []tools.ServerStatus
}

// loopBody is the body of POST /v1/loops.
type loopBody struct {
	Prompt           *string                   `json:"prompt"`
	Messages         []json.RawMessage         `json:"messages"`
	SystemPrompt     string                    `json:"systemPrompt"`
	Model            string                    `json:"model"`
	ModelPreferences *sampler.ModelPreferences `json:"modelPreferences"`
	AllowedTools     []string                  `json:"allowedTools"`
	ToolChoice       json.RawMessage           `json:"toolChoice"` // a sampler.ToolChoice (see decodeAt)
	MaxIterations    *int                      `json:"maxIterations"`
	TimeoutMs        *int64                    `json:"timeoutMs"`
	MaxTokens        *int                      `json:"maxTokens"`
	Temperature      *float64                  `json:"temperature"`
	StreamDeltas     bool                      `json:"streamDeltas"`
}

type loopLinks struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

func links(id string) loopLinks {
	return loopLinks{Self: "/v1/loops/" + id, Events: "/v1/loops/" + id + "/events"}
}

func (s *server) handleStartLoop(w http.ResponseWriter, r *http.Request) {
	var b loopBody
	if err := s.decodeBody(w, r, &b, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The engine checks the limits and fills in its defaults.
	spec := loop.Spec{Origin: loop.Origin{Kind: loop.OriginHTTP}, SystemPrompt: b.SystemPrompt, ModelSpec: b.Model, ModelPreferences: b.ModelPreferences,
		AllowedTools: b.AllowedTools, Temperature: b.Temperature, StreamDeltas: b.StreamDeltas,
		MaxIterations: b.MaxIterations, MaxTokens: b.MaxTokens}
	if b.TimeoutMs != nil {
		d := time.Duration(*b.TimeoutMs) * time.Millisecond
		if ms, most := *b.TimeoutMs, int64(math.MaxInt64/time.Millisecond); ms > most || ms < -most {
			d = math.MaxInt64 // out of range, and refused as such
		}
		spec.Timeout = &d
	}
	errs := decodeAt("/toolChoice", b.ToolChoice, &spec.ToolChoice)
	switch {
	case b.Prompt != nil && b.Messages != nil:
		errs = append(errs, sampler.FieldError{Path: "/prompt", Message: "give either prompt or messages, not both"})
	case b.Prompt != nil && *b.Prompt == "":
		errs = append(errs, sampler.FieldError{Path: "/prompt", Message: "prompt must not be empty"})
	}
	if len(errs) > 0 {
		s.writeError(w, r, sampler.InvalidAll(errs))
		return
	}
	switch {
	case b.Prompt != nil:
		spec.Messages = []sampler.Message{sampler.UserMessage(sampler.TextBlock(*b.Prompt))}
	case b.Messages != nil:
		msgs, err := sampler.DecodeMessages(b.Messages)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		spec.Messages = msgs
	}
	// The run belongs to the caller's key, and counts against its
	// concurrent loops until it ends.
	spec.Caller = callerOf(r.Context())
	// Not r.Context(): it also ends when this handler returns, which a
	// stream does when its client fell too far behind and must resume by id.
	id, err := s.loops.Start(context.WithoutCancel(r.Context()), spec)
	if err != nil { // a loop limit's 429 among them (access.LimitError)
		s.writeError(w, r, loopError("", err))
		return
	}
	addLog(r.Context(), slog.String("loopId", id))
	if acceptsEventStream(r) {
		// A streaming client that goes away cancels the loop it started.
		if s.streamEvents(w, r, id, 0) {
			if err := s.runs.Cancel(context.WithoutCancel(r.Context()), id); err != nil && !errors.Is(err, runs.ErrFinished) {
				s.log.Error("cancel the loop of a streaming client gone", "loopId", id, "error", err)
			}
		}
		return
	}
	w.Header().Set("Location", "/v1/loops/"+id)
	s.writeJSON(w, http.StatusCreated, map[string]any{"id": id, "status": loop.StatusRunning, "links": links(id)})
}

func acceptsEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func (s *server) handleGetLoop(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	snap, err := s.runs.Snapshot(r.Context(), id)
	if err != nil {
		s.writeError(w, r, loopError(id, err))
		return
	}
	// The snapshot's members pass through as they are (numbers keep every
	// digit); only links is added.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(snap, &m); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.keyed() {
		var owner string
		if json.Unmarshal(m["owner"], &owner) != nil || owner != ownerOf(r.Context()) {
			s.writeError(w, r, loopError(id, runs.ErrNotFound))
			return
		}
	}
	if m["links"], err = json.Marshal(links(id)); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, m)
}

// loopSummary is one run of GET /v1/loops: the summary the run store keeps
// (loop.Summary: no transcript, a preview of the result), and links.
type loopSummary struct {
	loop.RunSummary
	Links loopLinks `json:"links"`
}

// Limits of GET /v1/loops.
const (
	defaultLoopPage = 20
	maxLoopPage     = 100
)

func (s *server) handleListLoops(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	var errs []sampler.FieldError
	limit := defaultLoopPage
	if v := qs.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLoopPage {
			errs = append(errs, sampler.FieldError{Path: "/limit", Message: "limit must be an integer from 1 to 100"})
		}
		limit = n
	}
	status, origin := qs.Get("status"), qs.Get("origin")
	switch status {
	case "", loop.StatusRunning, loop.StatusCompleted, loop.StatusMaxIterations, loop.StatusTimeout, loop.StatusCancelled, loop.StatusFailed:
	default:
		errs = append(errs, sampler.FieldError{Path: "/status", Message: "status must be one of running, completed, max_iterations, timeout, cancelled, failed"})
	}
	if len(errs) > 0 {
		s.writeError(w, r, sampler.InvalidAll(errs))
		return
	}
	keyed, owner := s.keyed(), ownerOf(r.Context())
	match := func(sum json.RawMessage) bool {
		var sm struct {
			Status string      `json:"status"`
			Origin loop.Origin `json:"origin"`
			Owner  string      `json:"owner"`
		}
		if json.Unmarshal(sum, &sm) != nil {
			return false
		}
		if keyed && sm.Owner != owner {
			return false
		}
		if sm.Origin.Kind == "" {
			sm.Origin.Kind = loop.OriginHTTP
		}
		switch {
		case status != "" && sm.Status != status:
			return false
		case origin == "":
			return true
		case origin == loop.OriginHTTP:
			return sm.Origin.Kind == loop.OriginHTTP
		default:
			return sm.Origin.Kind == loop.OriginMCP && sm.Origin.Server == origin
		}
	}
	page, err := s.runs.List(r.Context(), runs.ListQuery{After: qs.Get("cursor"), Limit: limit, Match: match})
	if err != nil {
		if errors.Is(err, runs.ErrCursor) {
			err = sampler.Invalid("/cursor", "cursor is not one a previous page gave")
		}
		s.writeError(w, r, loopError("", err))
		return
	}
	out := struct {
		Loops []loopSummary `json:"loops"`
		Next  string        `json:"next,omitempty"`
	}{Loops: make([]loopSummary, 0, len(page.Runs)), Next: page.Next}
	for _, run := range page.Runs {
		var sum loopSummary
		if err := json.Unmarshal(run.Summary, &sum); err != nil {
			s.writeError(w, r, fmt.Errorf("loop %s: decode summary: %w", run.ID, err))
			return
		}
		if sum.Origin.Kind == "" {
			sum.Origin.Kind = loop.OriginHTTP
		}
		sum.ID, sum.Links = run.ID, links(run.ID)
		out.Loops = append(out.Loops, sum)
	}
	s.writeJSON(w, http.StatusOK, out)
}

func (s *server) handleCancelLoop(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.checkOwner(r.Context(), id); err != nil {
		s.writeError(w, r, loopError(id, err))
		return
	}
	if err := s.runs.Cancel(r.Context(), id); err != nil {
		s.writeError(w, r, loopError(id, err))
		return
	}
	s.writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "status": "cancelling", "links": links(id)})
}

func (s *server) handleLoopEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	var after int64
	if last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, sampler.Invalid("/lastEventId", "Last-Event-ID must be a non-negative event id"))
			return
		}
		after = n
	}
	if err := s.checkOwner(r.Context(), id); err != nil {
		s.writeError(w, r, loopError(id, err))
		return
	}
	s.streamEvents(w, r, id, after)
}

func (s *server) handleTools(w http.ResponseWriter, r *http.Request) {
	list := s.tools.Tools()
	if list == nil {
		list = []tools.Tool{}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"tools": list, "servers": s.tools.Status()})
}

// checkOwner gives runs.ErrNotFound when API keys are configured and the
// run belongs to another key than the caller's: to another key, a run it
// does not own does not exist.
func (s *server) checkOwner(ctx context.Context, id string) error {
	if !s.keyed() {
		return nil
	}
	snap, err := s.runs.Snapshot(ctx, id)
	if err != nil {
		return err
	}
	var o struct {
		Owner string `json:"owner"`
	}
	if err := json.Unmarshal(snap, &o); err != nil {
		return fmt.Errorf("loop %s: decode snapshot: %w", id, err)
	}
	if o.Owner != ownerOf(ctx) {
		return fmt.Errorf("loop %s of another key: %w", id, runs.ErrNotFound)
	}
	return nil
}

// storeRetryAfter is the Retry-After of the 503 of a loop route while the
// run store does not answer.
const storeRetryAfter = 5 * time.Second

// loopError maps run-store errors to problems.
func loopError(id string, err error) error {
	switch {
	case errors.Is(err, runs.ErrNotFound):
		return &bodyError{status: http.StatusNotFound, slug: "loop-not-found", title: "Loop not found",
			detail: "no loop " + id + " (finished loops expire)"}
	case errors.Is(err, runs.ErrFinished):
		return &bodyError{status: http.StatusConflict, slug: "loop-finished", title: "Loop already finished",
			detail: "loop " + id + " is no longer running"}
	case errors.Is(err, runs.ErrClosed), errors.Is(err, loop.ErrClosed):
		return &bodyError{status: http.StatusServiceUnavailable, slug: "not-ready", title: "Not ready",
			detail: "the service is shutting down; try again"}
	case errors.Is(err, runs.ErrUnavailable):
		return &bodyError{status: http.StatusServiceUnavailable, slug: "not-ready", title: "Not ready",
			detail: "the run store does not answer; try again", retryAfter: storeRetryAfter}
	case errors.Is(err, runs.ErrExpired):
		return &bodyError{status: http.StatusGone, slug: "events-expired", title: "Events no longer retained",
			detail: "the events after this id are no longer kept; read the run with GET /v1/loops/" + id}
	}
	return err
}
