package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/chat"
	"github.com/sampled/sampled/internal/openaiapi"
	"github.com/sampled/sampled/internal/sampler"
)

// attemptsHeader says how many model calls an answer took, corrective
// retries included.
const attemptsHeader = "Sampled-Attempts"

// costHeader says what an answer's upstream calls cost in US dollars at
// the configured prices, corrective retries included (a decimal such as
// 0.000123). Streams go without it: their headers leave before the cost
// is known.
const costHeader = "Sampled-Cost-USD"

// setCost sets the cost header of an answer, or of the error of a
// guarantee that ran out of attempts, whose calls were paid for too.
func setCost(w http.ResponseWriter, res *sampler.Result, err error) {
	var ex *sampler.ExhaustedError
	switch {
	case err == nil:
		w.Header().Set(costHeader, formatUSD(res.Usage.CostUSD))
	case errors.As(err, &ex) && ex.LastResult != nil:
		w.Header().Set(costHeader, formatUSD(ex.LastResult.Usage.CostUSD))
	}
}

// formatUSD writes dollars as a plain decimal, to the billionth of a
// dollar that costs are kept to (sampler.RoundUSD), as the body's costUsd.
func formatUSD(v float64) string {
	return strconv.FormatFloat(sampler.RoundUSD(v), 'f', -1, 64)
}

// handleOpenAIModels lists the configured models as OpenAI's API does.
func (s *server) handleOpenAIModels(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, openaiapi.Models(s.sampler.Catalog().Models()))
}

// handleOpenAIChat answers OpenAI's POST /chat/completions with the
// domain's guarantees: with a JSON response_format the answer validates
// against its schema (SampleSchema), with tools every call names a
// declared tool with valid arguments and keeps tool_choice (Sample, tools
// mode), each corrected when it fails. A streamed guaranteed answer is
// sent once it validated, unless the request asks for the raw stream.
func (s *server) handleOpenAIChat(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	if err := s.decodeBody(w, r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := openaiapi.Decode(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	call, err := req.Call(s.sampler.DefaultMaxTokens())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := call.Params
	p.Caller = "openai_chat"
	run := s.sampler.Sample
	if p.Mode() == sampler.ModeSchema {
		run = s.sampler.SampleSchema
	}
	meta := openaiapi.NewMeta(time.Now())
	if call.Stream {
		s.streamChat(w, r, call, run, meta)
		return
	}
	res, err := run(r.Context(), p)
	setAttempts(w, res, err)
	setCost(w, res, err)
	if err != nil {
		s.writeError(w, r, call.Err(err))
	} else {
		s.writeJSON(w, http.StatusOK, openaiapi.Completion(meta, res))
	}
	s.sampled(r.Context(), p, res, err)
}

// setAttempts sets the attempts header of an answer, or of the error of a
// guarantee that ran out of attempts.
func setAttempts(w http.ResponseWriter, res *sampler.Result, err error) {
	var ex *sampler.ExhaustedError
	switch {
	case err == nil:
		w.Header().Set(attemptsHeader, strconv.Itoa(res.Attempts))
	case errors.As(err, &ex):
		w.Header().Set(attemptsHeader, strconv.Itoa(ex.Attempts))
	}
}

// streamChat answers a streamed request. A plain answer streams live, a
// chunk for each delta. A guaranteed answer cannot be taken back once
// sent, so it is sent when it has validated, as the chunks of the whole
// answer; with sampled.rawStream every attempt streams live instead, each
// after the first announced by an SSE comment (": attempt 2"), which the
// SDKs skip. A request that fails before any chunk went out is answered
// with its error and status; one that fails later ends its stream with
// OpenAI's error event and no [DONE].
func (s *server) streamChat(w http.ResponseWriter, r *http.Request, call *openaiapi.Call, run sampleFunc, meta openaiapi.Meta) {
	p := call.Params
	cs := &chunkStream{eventStream{s: s, w: w, r: r}}
	model := p.ModelSpec
	if m, err := s.sampler.Catalog().Select(p.ModelSpec, nil); err == nil {
		model = m.ID()
	}
	chunks := &openaiapi.Chunks{Meta: meta, Model: model}
	live := !call.Guaranteed() || call.RawStream
	if live {
		if !call.Guaranteed() {
			w.Header().Set(attemptsHeader, "1")
		}
		p.OnDelta = func(d sampler.Delta) { cs.chunks(chunks.Delta(d)) }
		p.OnRetry = func(attempt int, _ []sampler.FieldError) { cs.comment("attempt " + strconv.Itoa(attempt)) }
	}
	res, err := run(r.Context(), p)
	switch {
	case err != nil && !cs.started:
		setAttempts(w, res, err)
		s.writeError(w, r, call.Err(err))
	case err != nil:
		cs.fail(call.Err(err))
	default:
		if !cs.started {
			setAttempts(w, res, nil)
		}
		if !live {
			cs.chunks(chunks.Result(res))
		}
		cs.chunks(chunks.Finish(res, call.IncludeUsage))
		cs.done()
	}
	s.sampled(r.Context(), p, res, err)
}

// chunkStream writes a streamed chat completion as server-sent events:
// each chunk as "data: <json>", then "data: [DONE]". The domain calls
// OnDelta and OnRetry on the handler's goroutine.
type chunkStream struct{ eventStream }

// data is one data-only event holding v as JSON.
func data(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a value sampled made itself can fail to encode.
		b, _ = json.Marshal(openaiapi.Error(http.StatusInternalServerError, "internal", "", nil, nil))
	}
	var m sse.Message
	m.AppendData(string(b))
	out, _ := m.MarshalText() // a bytes.Buffer does not fail
	return out
}

// chunks writes chunks in one write.
func (c *chunkStream) chunks(chunks []chat.Chunk) {
	var b []byte
	for _, ch := range chunks {
		b = append(b, data(ch)...)
	}
	if len(b) > 0 {
		c.send(b, false)
	}
}

// comment writes an SSE comment.
func (c *chunkStream) comment(text string) {
	var m sse.Message
	m.AppendComment(text)
	b, _ := m.MarshalText()
	c.send(b, false)
}

// done ends the stream as OpenAI's do.
func (c *chunkStream) done() {
	var m sse.Message
	m.AppendData("[DONE]")
	b, _ := m.MarshalText()
	c.send(b, true)
}

// fail ends a started stream with err as OpenAI's error event, which the
// SDKs raise; a client that went away gets nothing.
func (c *chunkStream) fail(err error) {
	if c.r.Context().Err() != nil {
		return
	}
	p := problemFor(err)
	c.s.logFailure(c.r, err, p)
	p.clip(c.r)
	c.send(data(openaiError(p)), true)
}
