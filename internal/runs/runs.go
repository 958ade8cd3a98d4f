// Package runs defines how loop runs are kept: a JSON snapshot of each run
// (status, transcript, result, written by the loop engine), the run's event
// log, which subscribers replay from an id and then follow live, and the
// requests to cancel it.
//
// The event log is what Server-Sent Events streams are made of: a client
// that reconnects with Last-Event-ID subscribes with after set to that id and
// gets exactly the events after it, with no duplicates and no gaps, then the
// live ones, and the stream ends after the run's terminal event.
//
// Store is the interface; each backend is a package of its own
// (runs/memory), and internal/testing/storetest is the conformance suite every backend
// passes.
package runs

import (
	"context"
	"encoding/json"
	"errors"
)

// Summarize makes the summary of a run, what List shows of it, from the
// run's snapshot: a few small members, never a transcript, so that listing
// costs the same however large the runs are. A Store calls it whenever the
// snapshot changes. A nil Summarize keeps the snapshot itself as summary.
type Summarize func(snapshot json.RawMessage) json.RawMessage

// Event is one event of a run's log. IDs start at 1 and increase by 1 per
// run.
type Event struct {
	// ID is the event's position in its run's log, from 1.
	ID int64 `json:"id"`
	// Name is the event's name, e.g. "loop.started", "tool.completed",
	// "loop.completed"; it is the SSE event type.
	Name string `json:"event"`
	// Data is the event's JSON payload; nil means JSON null. A Store may
	// hand the same Data to every subscriber: treat it as read-only.
	Data json.RawMessage `json:"data"`
}

// Errors of a Store. Implementations wrap them with %w; compare with
// errors.Is.
var (
	// ErrNotFound: there is no run with that id, or it expired.
	ErrNotFound = errors.New("run not found")
	// ErrExists: Create was given the id of a run that is still kept.
	ErrExists = errors.New("run already exists")
	// ErrFinished: Append, Finish or Cancel was called after the run's
	// terminal event.
	ErrFinished = errors.New("run finished")
	// ErrSlow: a subscription was cut because its subscriber fell more than
	// the store allows behind the live events. The subscriber can resume
	// from the last id it read.
	ErrSlow = errors.New("subscriber too slow")
	// ErrExpired: Subscribe was asked to replay from an id older than the
	// retained window of the log.
	ErrExpired = errors.New("events no longer retained")
	// ErrClosed: the store was closed. A subscription it ended can resume
	// by id elsewhere (another replica, after a restart).
	ErrClosed = errors.New("run store closed")
	// ErrCursor: List was given a cursor it did not make.
	ErrCursor = errors.New("invalid cursor")
	// ErrUnavailable: the store's backend did not answer (Redis is down
	// or unreachable); asking again later may succeed.
	ErrUnavailable = errors.New("run store unavailable")
)

// DefaultListLimit is the page size of List when the query gives none.
const DefaultListLimit = 20

// ListQuery selects a page of runs for List.
type ListQuery struct {
	// After is the Next of the previous page; "" starts with the newest run.
	After string
	// Limit is the most runs of the page; 0 or less means
	// DefaultListLimit.
	Limit int
	// Match, if set, keeps the runs whose summary it accepts; nil keeps
	// all. A backend may call it for every run it keeps, one at a time,
	// and must not hold a lock that Store's methods need meanwhile.
	Match func(summary json.RawMessage) bool
}

// Listed is one run of a page: its id and the summary of its latest
// snapshot (see Summarize).
type Listed struct {
	ID      string
	Summary json.RawMessage
}

// Page is a page of runs, newest (most recently created) first.
type Page struct {
	Runs []Listed
	// Next is the cursor of the page after this one, "" when there is
	// none. A cursor stays valid while runs are created and expire: the
	// next page holds the matching runs created before the last one of
	// this page that are still kept.
	Next string
}

// Store keeps runs: a JSON snapshot of each, an event log, and requests to
// cancel. Every method is safe for concurrent use, also from several
// processes sharing one backend.
//
// A run is running from Create until Finish; a finished run is kept for the
// store's time to live, then it is gone (ErrNotFound) and its id can be
// created again. A log keeps a bounded window of a run's latest events.
// A store also bounds the bytes of the runs it keeps: past its cap it
// drops the oldest finished runs before their time to live (running runs
// are never dropped).
type Store interface {
	// Create adds a running run with an empty log. An id still kept gives
	// ErrExists.
	Create(ctx context.Context, id string, snapshot json.RawMessage) error
	// SetSnapshot replaces the run's snapshot (also after Finish, until the
	// run expires).
	SetSnapshot(ctx context.Context, id string, snapshot json.RawMessage) error
	// Snapshot returns the run's latest snapshot.
	Snapshot(ctx context.Context, id string) (json.RawMessage, error)
	// Append adds an event to a running run's log and returns it with its
	// id. After Finish it gives ErrFinished.
	Append(ctx context.Context, id, name string, data json.RawMessage) (Event, error)
	// Finish appends the run's terminal event and, in the same step,
	// replaces its snapshot (unless snapshot is nil): whoever reads the
	// terminal event reads the final snapshot, and Cancel from then on
	// gives ErrFinished. Subscriptions end after delivering the event, and
	// the run starts to expire.
	Finish(ctx context.Context, id, name string, data, snapshot json.RawMessage) (Event, error)
	// Subscribe replays the retained events with ID > after (after < 0
	// counts as 0), then follows live ones. Replaying from before the
	// retained window gives ErrExpired. The subscription ends after the
	// terminal event was delivered, when ctx ends, on its Close, when the
	// store closes, or when the subscriber falls too far behind (ErrSlow).
	// A subscription to a finished run delivers the replay and ends.
	// A subscription after an id the run has not reached (yet) skips the
	// events up to that id but not the terminal event: it ends with it, as
	// every subscription that ends with its run does.
	Subscribe(ctx context.Context, id string, after int64) (Subscription, error)
	// List returns a page of the kept runs (running, or finished and not
	// yet expired) that q.Match accepts, newest first, with their
	// summaries: its cost does not depend on the runs' sizes. A cursor
	// List did not make gives ErrCursor.
	List(ctx context.Context, q ListQuery) (Page, error)
	// Cancel asks for a running run to be cancelled: the one watching the
	// run's Cancelled channel, wherever it runs, stops the run, which then
	// finishes. Cancelling again is no error. A finished run gives
	// ErrFinished.
	Cancel(ctx context.Context, id string) error
	// Cancelled returns a channel that is closed once Cancel was called for
	// the run, before or after this call. The loop engine watches it while
	// it runs the loop; ctx bounds the watch (a backend may stop watching
	// when ctx ends, and the channel then never closes).
	Cancelled(ctx context.Context, id string) (<-chan struct{}, error)
	// Close ends every subscription (Err gives ErrClosed) and releases what
	// the store holds. Nothing waits on a closed store: Subscribe then
	// gives ErrClosed, or a subscription that delivers at most its replay
	// and ends with ErrClosed. Close is idempotent.
	Close() error
}

// Subscription is a subscriber's view of one run's event log: the replayed
// events, then the live ones, on one channel. Nothing in a subscription
// waits for its subscriber: one that falls too far behind is cut (ErrSlow)
// and resumes by id.
type Subscription interface {
	// Events returns the channel of events, in id order, with no gap or
	// duplicate. It is closed when the subscription ends; events received
	// before stay valid.
	Events() <-chan Event
	// Err tells why the channel was closed: nil after the terminal event,
	// when the subscription's ctx ended or on Close; ErrSlow if the
	// subscriber fell too far behind, ErrClosed if the store closed, or a
	// backend's error. Before the channel is closed it returns nil.
	Err() error
	// Close ends the subscription and releases what the store holds for
	// it. It is idempotent and safe to call concurrently with everything
	// else. Events already buffered may still be received.
	Close()
}
