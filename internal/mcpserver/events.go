package mcpserver

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of what eventStore keeps of one session: the events of its
// latest streams, so that a client can resume a call's stream it lost
// (Last-Event-ID), while a session that stays open for millions of calls
// keeps no more than these.
const (
	maxSessionStreams = 64
	maxSessionBytes   = 4 << 20
)

// eventStore is the /mcp handler's mcp.EventStore. go-sdk's
// MemoryEventStore keeps an entry for every stream of a session until the
// session ends (about 280 bytes a tools/call) and bounds only the bytes of
// all sessions together; this one forgets a session's oldest streams, whole.
type eventStore struct {
	mu       sync.Mutex
	sessions map[string]*sessionEvents
}

// sessionEvents are the kept streams of one session, oldest first in order.
type sessionEvents struct {
	streams map[string]*streamEvents
	order   []string
	bytes   int
}

// streamEvents are a stream's events, from its first (index 0): streams are
// forgotten whole, never in part.
type streamEvents struct {
	data [][]byte
}

func newEventStore() *eventStore { return &eventStore{sessions: map[string]*sessionEvents{}} }

// stream returns the events of a session's stream, made if new. It needs s.mu.
func (s *eventStore) stream(sessionID, streamID string) (*sessionEvents, *streamEvents) {
	se := s.sessions[sessionID]
	if se == nil {
		se = &sessionEvents{streams: map[string]*streamEvents{}}
		s.sessions[sessionID] = se
	}
	st := se.streams[streamID]
	if st == nil {
		st = &streamEvents{}
		se.streams[streamID] = st
		se.order = append(se.order, streamID)
	}
	return se, st
}

// Open implements mcp.EventStore.
func (s *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream(sessionID, streamID)
	return nil
}

// Append implements mcp.EventStore: the session's oldest streams go once it
// holds too many, or too many bytes; the stream appended to stays.
func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, st := s.stream(sessionID, streamID)
	st.data = append(st.data, data)
	se.bytes += len(data)
	for len(se.order) > 1 && (len(se.order) > maxSessionStreams || se.bytes > maxSessionBytes) {
		oldest := se.order[0]
		if oldest == streamID {
			se.order = append(se.order[1:], oldest)
			continue
		}
		for _, d := range se.streams[oldest].data {
			se.bytes -= len(d)
		}
		delete(se.streams, oldest)
		se.order = se.order[1:]
	}
	return nil
}

// After implements mcp.EventStore. A stream the store has forgotten is
// reported as purged, as go-sdk asks.
func (s *eventStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var (
		data [][]byte
		err  error
	)
	switch se := s.sessions[sessionID]; {
	case se == nil:
		err = fmt.Errorf("mcpserver: unknown session %q", sessionID)
	case se.streams[streamID] == nil:
		err = fmt.Errorf("mcpserver: stream %q of session %q: %w", streamID, sessionID, mcp.ErrEventsPurged)
	default:
		st := se.streams[streamID]
		if start := max(index+1, 0); start < len(st.data) {
			data = slices.Clone(st.data[start:])
		}
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range data {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements mcp.EventStore.
func (s *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionID)
	return nil
}
