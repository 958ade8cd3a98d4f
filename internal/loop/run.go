package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/telemetry"
	"github.com/sampled/sampled/internal/tools"
)

// Event payloads of the catalogue.
type (
	startedEvent struct {
		ID            string   `json:"id"`
		TraceID       string   `json:"traceId"`
		Origin        Origin   `json:"origin"`
		Model         string   `json:"model,omitempty"`
		Tools         []string `json:"tools"`
		MaxIterations int      `json:"maxIterations"`
		TimeoutMs     int64    `json:"timeoutMs"`
	}
	modelEvent struct {
		Iteration  int                `json:"iteration"`
		Model      string             `json:"model"`
		StopReason string             `json:"stopReason"`
		Text       string             `json:"text"`
		ToolCalls  []sampler.ToolCall `json:"toolCalls"`
		Usage      sampler.Usage      `json:"usage"`
		DurationMs int64              `json:"durationMs"`
	}
	deltaEvent struct {
		Iteration int                    `json:"iteration"`
		Text      string                 `json:"text,omitempty"`
		ToolCall  *sampler.ToolCallDelta `json:"toolCall,omitempty"`
	}
	toolStartedEvent struct {
		Iteration int             `json:"iteration"`
		CallID    string          `json:"callId"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	toolCompletedEvent struct {
		Iteration         int               `json:"iteration"`
		CallID            string            `json:"callId"`
		Name              string            `json:"name"`
		IsError           bool              `json:"isError"`
		Content           []sampler.Content `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
		DurationMs        int64             `json:"durationMs"`
	}
	iterationEvent struct {
		TraceID    string   `json:"traceId"`
		Iteration  int      `json:"iteration"`
		ToolCalls  []string `json:"toolCalls"`
		DurationMs int64    `json:"durationMs"`
	}
	completedEvent struct {
		TraceID         string        `json:"traceId"`
		Status          string        `json:"status"`
		TotalIterations int           `json:"totalIterations"`
		Success         bool          `json:"success"`
		DurationMs      int64         `json:"durationMs"`
		Result          string        `json:"result"`
		Error           string        `json:"error,omitempty"`
		Usage           sampler.Usage `json:"usage"`
	}
)

// run is one loop in progress. Only its goroutine touches it, except the
// parallel tool calls, which only emit events.
type run struct {
	e *Engine
	// stop ends the loop's context with a cause, e.g. errStore.
	stop context.CancelCauseFunc
	id   string
	spec Spec
	lim  limits
	defs []sampler.Tool // the tools the loop offers the model
	snap *Snapshot
	log  *slog.Logger
	// onIteration, if not nil, is told each iteration's end.
	onIteration func(int)
	// logBytes counts the data of the events emitted, recorded or not;
	// saved is the length of the transcript last saved.
	logBytes atomic.Int64
	saved    int
	// nested is the usage of the current iteration's tool calls' nested
	// sampling (addNested, takeNested).
	nestedMu sync.Mutex
	nested   sampler.Usage
}

func (r *run) emit(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		r.log.Error("encode event", "event", name, "error", err)
		return
	}
	if r.logBytes.Add(int64(len(b))) > int64(r.e.o.MaxRunBytes) {
		// The log stops short of its cap; the run ends failed, with its
		// terminal event.
		r.stop(errTooLarge)
		return
	}
	// Events are recorded even when the loop's context has ended: the
	// terminal event of a cancelled loop must reach its subscribers.
	if _, err := r.e.o.Store.Append(context.Background(), r.id, name, b); err != nil {
		// The store retried what it could. A loop whose events are not
		// all recorded stops, rather than leave a gap in its log: it ends
		// failed, or, if its run was ended meanwhile (by another replica
		// that found its lease expired), it is over.
		r.log.Error("append event", "event", name, "error", err)
		r.stop(errStore)
		return
	}
	r.e.o.Metrics.SSEEvents.WithLabelValues(name).Inc()
}

// watchCancel stops the run with errCancelled once it is asked to cancel
// through the store, until ctx ends.
func (r *run) watchCancel(ctx context.Context) error {
	cancelled, err := r.e.o.Store.Cancelled(ctx, r.id)
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-cancelled:
			r.stop(errCancelled)
		case <-ctx.Done():
		}
	}()
	return nil
}

// save records the run's snapshot, unless its transcript grew past the
// run's cap: then the run stops, to end failed.
func (r *run) save() {
	b, err := json.Marshal(r.snap)
	if err == nil && len(b) > r.e.o.MaxRunBytes {
		r.stop(errTooLarge)
		return
	}
	if err == nil {
		err = r.e.o.Store.SetSnapshot(context.Background(), r.id, b)
	}
	if err != nil {
		r.log.Error("save run", "error", err)
		return
	}
	r.saved = len(r.snap.Messages)
}

// run runs the loop under parent, which r.stop ends.
func (r *run) run(parent context.Context) {
	start := time.Now()
	parent, span := agentSpan(parent, r)
	defer func() { endAgentSpan(span, r.snap) }()
	ctx, stop := context.WithTimeoutCause(parent, r.lim.timeout, context.DeadlineExceeded)
	defer stop()
	r.emit(EventLoopStarted, startedEvent{ID: r.id, TraceID: r.snap.TraceID, Origin: r.snap.Origin, Model: r.spec.ModelSpec, Tools: r.snap.Tools,
		MaxIterations: r.lim.maxIterations, TimeoutMs: r.lim.timeout.Milliseconds()})
	status, errText := StatusFailed, "the run store failed"
	if err := r.watchCancel(parent); err != nil {
		// A loop that could not be cancelled does not run.
		r.log.Error("watch for cancellation", "error", err)
	} else {
		status, errText = r.iterate(ctx)
	}
	if cause := context.Cause(ctx); errors.Is(cause, errStore) || errors.Is(cause, errTooLarge) {
		// Whatever the loop came to, its log lacks an event.
		status, errText = r.failure(ctx, cause)
	}
	r.end(parent, start, status, errText)
}

// iterate runs the iterations until the model answers in text, a limit is
// reached or the loop fails, and returns the loop's status.
func (r *run) iterate(ctx context.Context) (status, errText string) {
	r.snap.Messages = slices.Clone(r.spec.Messages)
	for it := 1; ; it++ {
		start := time.Now()
		ictx, span := iterationSpan(ctx, it)
		res, err := r.sample(ictx, it)
		if err != nil {
			telemetry.Fail(span, err, "")
			span.End()
			return r.failure(ctx, err)
		}
		calls := r.answered(it, res, start)
		if len(calls) > 0 && it < r.lim.maxIterations {
			r.snap.Messages = append(r.snap.Messages, sampler.UserMessage(r.callTools(ictx, it, calls)...))
			r.snap.Usage = r.snap.Usage.Add(r.takeNested())
			r.save()
		}
		r.endIteration(it, calls, start)
		span.End()
		switch {
		case len(calls) == 0:
			r.snap.Result = res.Text
			return StatusCompleted, ""
		case it == r.lim.maxIterations:
			// The model still wants tools on the last allowed iteration.
			return StatusMaxIterations, ""
		case ctx.Err() != nil:
			return r.failure(ctx, ctx.Err())
		}
	}
}

// sample asks the model for iteration it of the transcript; with
// StreamDeltas its answer's fragments are model.delta events.
func (r *run) sample(ctx context.Context, it int) (*sampler.Result, error) {
	p := &sampler.Params{
		Request: sampler.Request{Messages: r.snap.Messages, SystemPrompt: r.spec.SystemPrompt, MaxTokens: r.lim.maxTokens,
			Temperature: r.spec.Temperature, Tools: r.defs, ToolChoice: r.toolChoice(it)},
		ModelSpec: r.spec.ModelSpec, ModelPreferences: r.spec.ModelPreferences,
		// The loop answers bad calls itself, where the model reads them.
		LenientToolCalls: true,
		Caller:           "loops",
	}
	if r.spec.StreamDeltas {
		p.OnDelta = func(d sampler.Delta) {
			r.emit(EventModelDelta, deltaEvent{Iteration: it, Text: d.Text, ToolCall: d.ToolCall})
		}
	}
	return r.e.o.Sampler.Sample(ctx, p)
}

// toolChoice is the tool choice of iteration it: a forced choice holds for
// the first iteration only, and the last allowed iteration calls no tool,
// so that the model answers in text.
func (r *run) toolChoice(it int) *sampler.ToolChoice {
	choice := r.spec.ToolChoice
	switch {
	case len(r.defs) == 0:
		return nil
	case it == r.lim.maxIterations:
		return &sampler.ToolChoice{Mode: sampler.ToolChoiceNone}
	case it > 1 && choice != nil && (choice.Mode == sampler.ToolChoiceRequired || choice.Mode == sampler.ToolChoiceTool):
		return &sampler.ToolChoice{Mode: sampler.ToolChoiceAuto}
	}
	return choice
}

// answered records the model's answer of iteration it, begun at start:
// in the snapshot, the transcript and a model.completed event. It returns
// the answer's tool calls.
func (r *run) answered(it int, res *sampler.Result, start time.Time) []sampler.ToolCall {
	r.snap.Model = res.Provider + "/" + res.Model
	r.snap.Iterations = it
	r.snap.Usage = r.snap.Usage.Add(res.Usage)
	calls := res.ToolCalls
	if calls == nil {
		calls = []sampler.ToolCall{}
	}
	r.emit(EventModelCompleted, modelEvent{Iteration: it, Model: r.snap.Model, StopReason: res.StopReason, Text: res.Text,
		ToolCalls: calls, Usage: res.Usage, DurationMs: time.Since(start).Milliseconds()})
	content := res.Content
	if len(content) == 0 {
		content = []sampler.Content{sampler.TextBlock("")}
	}
	r.snap.Messages = append(r.snap.Messages, sampler.AssistantMessage(content...))
	return calls
}

// endIteration records the end of iteration it, begun at start, whose
// answer called calls.
func (r *run) endIteration(it int, calls []sampler.ToolCall, start time.Time) {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Name
	}
	r.emit(EventIterationCompleted, iterationEvent{TraceID: r.snap.TraceID, Iteration: it, ToolCalls: names,
		DurationMs: time.Since(start).Milliseconds()})
	if r.onIteration != nil {
		r.onIteration(it)
	}
}

// end records the end of the loop begun at start: its final snapshot, its
// metrics and the terminal event. ctx holds the run's span, whose ids its
// log line carries.
func (r *run) end(ctx context.Context, start time.Time, status, errText string) {
	now := time.Now().UTC()
	r.snap.Status, r.snap.Error, r.snap.FinishedAt = status, errText, &now
	r.e.o.Metrics.LoopsTotal.WithLabelValues(status).Inc()
	r.e.o.Metrics.LoopIterations.Observe(float64(r.snap.Iterations))
	r.log.InfoContext(ctx, "loop finished", "status", status, "iterations", r.snap.Iterations, "duration", time.Since(start))
	// The terminal event and the final snapshot are recorded in one step:
	// whoever reads the event reads the final status, and from then on the
	// run can no longer be cancelled.
	data, _ := json.Marshal(completedEvent{TraceID: r.snap.TraceID, Status: status, TotalIterations: r.snap.Iterations,
		Success: status == StatusCompleted, DurationMs: time.Since(start).Milliseconds(), Result: r.snap.Result,
		Error: errText, Usage: r.snap.Usage}) // strings and numbers
	snap, err := json.Marshal(r.snap)
	if err == nil && len(snap) > r.e.o.MaxRunBytes {
		// The transcript grew past the cap since it was last saved: the
		// final snapshot keeps the saved one.
		r.snap.Messages = r.snap.Messages[:r.saved]
		snap, err = json.Marshal(r.snap)
	}
	if err == nil {
		_, err = r.e.o.Store.Finish(context.Background(), r.id, EventLoopCompleted, data, snap)
	}
	if err != nil {
		r.log.Error("finish run", "error", err)
		return
	}
	r.e.o.Metrics.SSEEvents.WithLabelValues(EventLoopCompleted).Inc()
}

// RunSummary is the summary of a run: its snapshot without the transcript
// and tools, and with a preview of its result.
type RunSummary struct {
	ID            string        `json:"id"`
	TraceID       string        `json:"traceId"`
	Origin        Origin        `json:"origin"`
	Owner         string        `json:"owner,omitempty"`
	Status        string        `json:"status"`
	Model         string        `json:"model,omitempty"`
	Iterations    int           `json:"iterations"`
	MaxIterations int           `json:"maxIterations"`
	Result        string        `json:"result,omitempty"`
	Error         string        `json:"error,omitempty"`
	Usage         sampler.Usage `json:"usage"`
	CreatedAt     time.Time     `json:"createdAt"`
	FinishedAt    *time.Time    `json:"finishedAt,omitempty"`
}

// previewBytes is the most of a run's result (and error) its summary
// holds.
const previewBytes = 200

// Summary is the summary of a run's snapshot that a run store keeps for
// listing (a runs.Summarize): its id, status, times, owner, origin, model,
// usage and a preview of its result, never its transcript. A snapshot
// that does not decode has the summary {}.
func Summary(snapshot json.RawMessage) json.RawMessage {
	var s RunSummary
	if json.Unmarshal(snapshot, &s) != nil {
		return json.RawMessage(`{}`)
	}
	s.Result, s.Error = preview(s.Result), preview(s.Error)
	b, _ := json.Marshal(s) // strings, numbers and times
	return b
}

// preview cuts s to previewBytes on a rune boundary, marking the cut.
func preview(s string) string {
	if len(s) <= previewBytes {
		return s
	}
	n := previewBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Abandoned returns the terminal event and final snapshot of a run that
// stopped without recording its end (the replica running it died): status
// failed, with reason as its error. A run store calls it, with the run's
// latest snapshot, to end such a run (see runs/redis Options.Abandon).
func Abandoned(id string, snapshot json.RawMessage, reason string) (name string, data, final json.RawMessage) {
	var snap Snapshot
	if json.Unmarshal(snapshot, &snap) != nil || snap.ID == "" {
		snap = Snapshot{ID: id, Messages: []sampler.Message{}, Tools: []string{}}
	}
	now := time.Now().UTC()
	snap.Status, snap.Error, snap.FinishedAt = StatusFailed, reason, &now
	var took int64
	if !snap.CreatedAt.IsZero() {
		took = now.Sub(snap.CreatedAt).Milliseconds()
	}
	data, _ = json.Marshal(completedEvent{TraceID: snap.TraceID, Status: StatusFailed, TotalIterations: snap.Iterations,
		DurationMs: took, Result: snap.Result, Error: reason, Usage: snap.Usage})
	final, _ = json.Marshal(snap)
	return EventLoopCompleted, data, final
}

// failure names the terminal status of a loop whose model call failed.
func (r *run) failure(ctx context.Context, err error) (string, string) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCancelled):
		return StatusCancelled, "cancelled"
	case errors.Is(cause, errStore):
		return StatusFailed, "the run store failed: an event could not be recorded"
	case errors.Is(cause, errTooLarge):
		return StatusFailed, fmt.Sprintf("the run grew past its size limit of %d bytes (its event log or its transcript)", r.e.o.MaxRunBytes)
	case errors.Is(cause, context.DeadlineExceeded):
		return StatusTimeout, fmt.Sprintf("the loop did not finish within %s", r.lim.timeout)
	}
	var inv *sampler.InvalidError
	if errors.As(err, &inv) {
		return StatusFailed, "invalid request: " + inv.Error()
	}
	// The caller's own limits (its tokens per minute, its budget) refused
	// the call: the error says which, and when to retry.
	if sampler.Limited(err) {
		return StatusFailed, err.Error()
	}
	var up *sampler.UpstreamError
	if errors.As(err, &up) {
		return StatusFailed, up.Error()
	}
	r.log.Error("model call failed", "error", err)
	return StatusFailed, "the model call failed"
}

// callTools runs the calls of one iteration concurrently, at most Parallel
// at a time, and returns their tool_result blocks in call order. Failing,
// unknown and disallowed tools become error results.
func (r *run) callTools(ctx context.Context, it int, calls []sampler.ToolCall) []sampler.Content {
	results := make([]sampler.Content, len(calls))
	slots := make(chan struct{}, r.e.o.Parallel)
	var wg sync.WaitGroup
	for i, c := range calls {
		slots <- struct{}{} // the calls start in order
		wg.Go(func() {
			defer func() { <-slots }()
			results[i] = r.callTool(ctx, it, c)
		})
	}
	wg.Wait()
	return results
}

// toolSamplingEvent is the data of tool.sampling.
type toolSamplingEvent struct {
	Iteration int           `json:"iteration"`
	CallID    string        `json:"callId"`
	Name      string        `json:"name"`
	Model     string        `json:"model,omitempty"`
	Run       string        `json:"run,omitempty"`
	Usage     sampler.Usage `json:"usage"`
}

// addNested adds the usage of a tool call's nested sampling; the calls of
// an iteration run at once.
func (r *run) addNested(u sampler.Usage) {
	r.nestedMu.Lock()
	r.nested = r.nested.Add(u)
	r.nestedMu.Unlock()
}

// takeNested returns the nested usage added since it was last taken.
func (r *run) takeNested() sampler.Usage {
	r.nestedMu.Lock()
	defer r.nestedMu.Unlock()
	u := r.nested
	r.nested = sampler.Usage{}
	return u
}

func (r *run) callTool(ctx context.Context, it int, c sampler.ToolCall) sampler.Content {
	start := time.Now()
	r.emit(EventToolStarted, toolStartedEvent{Iteration: it, CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
	ctx, span := toolSpan(ctx, c)
	// The sampling the tool's server asks sampled for while it runs is the
	// loop's too: a tool.sampling event, and its usage joins the run's.
	ctx = tools.WithNestedUsage(ctx, func(n tools.Nested) {
		r.addNested(n.Usage)
		r.emit(EventToolSampling, toolSamplingEvent{Iteration: it, CallID: c.ID, Name: c.Name, Model: n.Model, Run: n.Run, Usage: n.Usage})
	})
	res, err := r.execute(ctx, c)
	if err != nil {
		res = &tools.Result{IsError: true, Content: []sampler.Content{sampler.TextBlock(err.Error())}}
	}
	if res.Content == nil {
		res.Content = []sampler.Content{}
	}
	res = r.cut(c.Name, res)
	endToolSpan(span, res, err)
	r.emit(EventToolCompleted, toolCompletedEvent{Iteration: it, CallID: c.ID, Name: c.Name, IsError: res.IsError,
		Content: res.Content, StructuredContent: res.StructuredContent, DurationMs: time.Since(start).Milliseconds()})
	isErr := res.IsError
	return sampler.Content{Type: sampler.BlockToolResult, ToolUseID: c.ID, Content: res.Content,
		StructuredContent: res.StructuredContent, IsError: &isErr}
}

// cut caps res at Options.MaxToolResultBytes, counting the text and data
// of its blocks and its structured content: past the cap, text is cut,
// what no longer fits is left out, and a last text block tells the model.
func (r *run) cut(name string, res *tools.Result) *tools.Result {
	limit := r.e.o.MaxToolResultBytes
	size := len(res.StructuredContent)
	for _, c := range res.Content {
		size += len(c.Text) + len(c.Data)
	}
	if size <= limit {
		return res
	}
	out := &tools.Result{IsError: res.IsError, Content: []sampler.Content{}}
	room := limit
	for _, c := range res.Content {
		switch n := len(c.Text) + len(c.Data); {
		case n <= room:
			room -= n
		case c.Type == sampler.BlockText && room > 0:
			for room > 0 && !utf8.RuneStart(c.Text[room]) {
				room--
			}
			c.Text, room = c.Text[:room], 0
		default:
			continue
		}
		out.Content = append(out.Content, c)
	}
	if len(res.StructuredContent) <= room {
		out.StructuredContent = res.StructuredContent
	}
	out.Content = append(out.Content, sampler.TextBlock(fmt.Sprintf(
		"[sampled cut this tool result: it held %d bytes, more than the %d bytes a tool result may hold]", size, limit)))
	r.log.Info("tool result cut", "tool", name, "bytes", size, "limit", limit)
	return out
}

// execute runs one call; an error is shown to the model as an error result.
func (r *run) execute(ctx context.Context, c sampler.ToolCall) (*tools.Result, error) {
	if ctx.Err() != nil {
		return nil, errors.New("not run: the loop is ending")
	}
	if !allowed(r.spec.AllowedTools, c.Name) {
		r.e.o.Metrics.ToolCalls.WithLabelValues("other", "disallowed").Inc()
		return nil, fmt.Errorf("tool %q is not allowed in this loop", c.Name)
	}
	tctx, cancel := context.WithTimeout(ctx, r.e.o.ToolTimeout)
	defer cancel()
	res, err := r.e.o.Tools.Call(tctx, c.Name, c.Arguments)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, tools.ErrUnknownTool):
		return nil, fmt.Errorf("unknown tool %q", c.Name)
	case ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("tool %q did not answer within %s", c.Name, r.e.o.ToolTimeout)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("tool %q was cancelled", c.Name)
	default:
		return nil, fmt.Errorf("tool %q failed: %v", c.Name, err)
	}
}
