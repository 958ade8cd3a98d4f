// Package runs keeps loop runs: a JSON snapshot of each run (status,
// transcript, result, written by the loop engine) and the run's event log,
// which subscribers replay from an id and then follow live.
//
// The event log is what Server-Sent Events streams are made of: a client
// that reconnects with Last-Event-ID subscribes with after set to that id and
// gets exactly the events after it, with no duplicates and no gaps, then the
// live ones, and the stream ends after the run's terminal event.
//
// Memory is the in-process Store. Its subscriptions cost no goroutine: events
// are delivered by non-blocking sends into buffered channels, so a slow
// subscriber never blocks Append nor other subscribers; it is dropped instead
// (ErrSlow) and resumes by id.
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// Event is one event of a run's log. IDs start at 1 and increase by 1 per
// run. A subscription delivers the log's own Event to every subscriber:
// treat it, Data included, as read-only.
type Event struct {
	// ID is the event's position in its run's log, from 1.
	ID int64 `json:"id"`
	// Name is the event's name, e.g. "loop.started", "tool.completed",
	// "loop.completed"; it is the SSE event type.
	Name string `json:"event"`
	// Data is the event's JSON payload; nil means JSON null.
	Data json.RawMessage `json:"data"`

	wire *wire // the memo of Wire; nil in an Event not made by a Store
}

// wire is an event's encoding for a transport, made once.
type wire struct {
	once sync.Once
	b    []byte
}

// Wire returns encode(e), the event as a transport sends it, computed once
// per event of a log: every subscriber to a run receives the log's own
// *Event, so the first to send it encodes it and the others reuse the bytes.
// Every caller must pass the same encoding. The result is shared: do not
// modify it. For an Event not made by a Store, Wire calls encode every time.
func (e *Event) Wire(encode func(*Event) []byte) []byte {
	if e.wire == nil {
		return encode(e)
	}
	e.wire.once.Do(func() { e.wire.b = encode(e) })
	return e.wire.b
}

// Errors of a Store. Implementations wrap them with %w; compare with
// errors.Is.
var (
	// ErrNotFound: there is no run with that id, or it expired.
	ErrNotFound = errors.New("run not found")
	// ErrExists: Create was given the id of a run that is still kept.
	ErrExists = errors.New("run already exists")
	// ErrFinished: Append was called after the run's terminal event.
	ErrFinished = errors.New("run finished")
	// ErrSlow: a subscription was dropped because its subscriber fell more
	// than its buffer behind. The subscriber can resume from the last id it
	// read.
	ErrSlow = errors.New("subscriber too slow")
	// ErrExpired: Subscribe was asked to replay from an id older than the
	// retained window of the log.
	ErrExpired = errors.New("events no longer retained")
)

// Store keeps runs: a JSON snapshot of each and an event log.
type Store interface {
	// Create adds a running run with an empty log. An id still kept gives
	// ErrExists.
	Create(ctx context.Context, id string, snapshot json.RawMessage) error
	// SetSnapshot replaces the run's snapshot (also after its terminal
	// event, until it expires).
	SetSnapshot(ctx context.Context, id string, snapshot json.RawMessage) error
	// Snapshot returns the run's latest snapshot.
	Snapshot(ctx context.Context, id string) (json.RawMessage, error)
	// Append adds an event and returns it with its id. terminal marks the
	// run's last event: the log is closed after it (ErrFinished) and the run
	// starts to expire.
	Append(ctx context.Context, id, name string, data json.RawMessage, terminal bool) (Event, error)
	// Subscribe replays the events with ID > after, then follows live ones.
	// The subscription's channel is closed after the terminal event was
	// delivered, when ctx ends, on Close, or when the subscriber falls more
	// than its buffer behind (then Err is ErrSlow and the subscriber can
	// resume by id). Replaying from before the retained window gives
	// ErrExpired.
	Subscribe(ctx context.Context, id string, after int64) (*Subscription, error)
}
