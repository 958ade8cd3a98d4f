package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sampled/sampled/client"
)

// collectStream reads a whole streamed answer: the text of each attempt, the
// retries, the result and the error.
func collectStream(t *testing.T, seq func(func(client.StreamEvent, error) bool)) (texts map[int]string, retries []client.Retry, res *client.Result, err error) {
	t.Helper()
	texts = map[int]string{}
	for ev, e := range seq {
		switch {
		case e != nil:
			err = e
		case ev.Delta != nil:
			texts[ev.Delta.Attempt] += ev.Delta.Text
		case ev.Retry != nil:
			retries = append(retries, *ev.Retry)
		case ev.Result != nil:
			res = ev.Result
		}
	}
	return texts, retries, res, err
}

// TestSampleStream: the deltas of a streamed answer make its text; a
// guaranteed helper's retry comes between its attempts.
func TestSampleStream(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	texts, retries, res, err := collectStream(t, c.SampleStream(ctx, client.RouteSample, &client.SampleRequest{Prompt: "Name three rivers"}))
	if err != nil || res == nil || texts[1] == "" || texts[1] != res.Text || len(retries) != 0 {
		t.Fatalf("texts %v, retries %v, result %+v, err %v", texts, retries, res, err)
	}

	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	texts, retries, res, err = collectStream(t, c.SampleStream(ctx, client.RouteSampleSchema, &client.SampleRequest{Prompt: "A person", Model: "offline/flaky", Schema: schema}))
	if err != nil || res == nil || res.Attempts != 2 || len(retries) != 1 || retries[0].Attempt != 2 || len(retries[0].Errors) == 0 {
		t.Fatalf("retries %+v, result %+v, err %v; want one retry, then a result of 2 attempts", retries, res, err)
	}
	if texts[2] != res.Text || !json.Valid([]byte(texts[2])) {
		t.Errorf("attempt 2 streamed %q; the result's text is %q", texts[2], res.Text)
	}
}

// TestSampleStreamErrors: a request refused at once is a *Problem; one
// whose attempts run out after streaming is a *ValidationError from the
// stream's error event.
func TestSampleStreamErrors(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	_, _, _, err := collectStream(t, c.SampleStream(ctx, client.RouteSample, &client.SampleRequest{Prompt: "hi", Model: "nope/none"}))
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 400 {
		t.Errorf("unknown model: %v; want a 400 problem", err)
	}
	zero := 0
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	texts, _, res, err := collectStream(t, c.SampleStream(ctx, client.RouteSampleSchema, &client.SampleRequest{Prompt: "A person", Model: "offline/broken", Schema: schema, Retries: &zero}))
	var ve *client.ValidationError
	if !errors.As(err, &ve) || ve.Attempts != 1 || ve.Problem.Status != 422 || res != nil || texts[1] == "" {
		t.Fatalf("err %v, result %v, streamed %v; want a ValidationError of 1 attempt after the attempt streamed", err, res, texts)
	}
	if ve.LastResult == nil || !strings.Contains(texts[1], strings.TrimSpace(ve.LastResult.Text)) {
		t.Errorf("last result %+v; streamed %q", ve.LastResult, texts[1])
	}
}
