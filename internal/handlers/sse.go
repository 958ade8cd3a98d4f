package handlers

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/sampled/sampled/internal/runs"
)

// maxStreamBatch bounds the bytes a stream gathers before it writes them.
const maxStreamBatch = 32 << 10

// heartbeatFrame is the SSE comment a stream sends when the heartbeat
// interval passes, as a chunk.
var heartbeatFrame = func() []byte {
	m := &sse.Message{}
	m.AppendComment("heartbeat")
	b, _ := m.MarshalText()
	return chunk(b)
}()

// lastChunk ends a chunked HTTP/1.1 body.
var lastChunk = []byte("0\r\n\r\n")

// chunk frames b as one chunk of a chunked HTTP/1.1 body.
func chunk(b []byte) []byte {
	f := make([]byte, 0, len(b)+12)
	f = strconv.AppendInt(f, int64(len(b)), 16)
	f = append(f, "\r\n"...)
	f = append(f, b...)
	return append(f, "\r\n"...)
}

// unchunk returns the bytes that the chunk f frames.
func unchunk(f []byte) []byte {
	return f[bytes.IndexByte(f, '\n')+1 : len(f)-2]
}

// encodeEvent is a run event as an SSE message, framed as a chunk: a stream
// that writes to its connection sends the frame, the others what it frames.
func encodeEvent(ev *runs.Event) []byte {
	m := &sse.Message{ID: sse.ID(strconv.FormatInt(ev.ID, 10)), Type: sse.Type(ev.Name)}
	m.AppendData(string(ev.Data))
	b, _ := m.MarshalText() // an event ID and name from the store are valid
	return chunk(b)
}

// A sink is where a stream's bytes go.
type sink interface {
	// piece is what the sink sends for the chunk f: f, or what it frames.
	piece(f []byte) []byte
	// send writes b. With end, b is the last of the stream.
	send(b []byte, end bool) error
	// cut makes a send in progress fail now.
	cut()
	// gone reports whether the client went away; once the subscription
	// ended, the answer is final.
	gone() bool
}

// streamEvents writes a run's events with id > after as SSE, follows live
// events and returns after the terminal event, when the client goes away,
// or when the client fell too far behind (it can resume by id). It reports
// whether it ended because the client went away.
//
// Its loop is what a published event costs per subscriber, so it is lean.
// An HTTP/1.1 stream writes to its connection itself (connSink): the
// layers of net/http's response writer cost about as much as the system
// call. An event's bytes are encoded once for all subscribers
// (runs.Event.Wire), events already queued are written with one write, and
// the loop waits on the subscription's channel alone. The heartbeat is
// written by its timer's own goroutine, under the mutex that serializes
// writes.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request, id string, after int64) (clientGone bool) {
	sub, err := s.runs.Subscribe(r.Context(), id, after)
	if err != nil {
		s.writeError(w, r, loopError(id, err))
		return r.Context().Err() != nil
	}
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	var out sink
	cs, err := s.hijack(w, r, sub)
	switch {
	case err != nil: // the client went away
		return true
	case cs != nil:
		defer cs.close()
		out = cs
	default:
		rs, err := openResponse(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return false
		}
		out = rs
	}
	s.metrics.SSESubscribers.Inc()
	defer s.metrics.SSESubscribers.Dec()

	var (
		mu     sync.Mutex    // serializes writes; guards failed and ended
		failed bool          // a write failed: the client is gone
		ended  bool          // streamEvents is returning: no more writes
		writes atomic.Uint64 // writes done
	)
	write := func(b []byte, end bool) bool {
		if out.send(b, end) != nil {
			failed = true
		}
		writes.Add(1)
		return !failed
	}
	// The heartbeat also finds a client that stopped reading: a write in
	// progress at two ticks in a row, with none done in between, has
	// waited a whole interval for the client. It is cut, and the stream
	// ends as for a client gone.
	stuck := ^uint64(0) // writes done when a write was last seen in progress
	mu.Lock()           // the timer's function reads beat
	var beat *time.Timer
	beat = time.AfterFunc(s.heartbeat, func() {
		if !mu.TryLock() {
			if n := writes.Load(); n == stuck {
				out.cut()
			} else {
				stuck = n
				beat.Reset(s.heartbeat)
			}
			return
		}
		defer mu.Unlock()
		stuck = ^uint64(0)
		if ended || failed {
			return
		}
		if !write(out.piece(heartbeatFrame), false) {
			sub.Close() // ends the loop below
			return
		}
		beat.Reset(s.heartbeat)
	})
	mu.Unlock()
	defer func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		beat.Stop()
	}()

	var batch bytes.Buffer
	events := sub.Events()
	finished := false // the stream's end is written
	for ev := range events {
		b := out.piece(ev.Wire(encodeEvent))
		// Gather the events already queued (a replay, or a subscriber
		// that fell behind) into one write, in batches of bounded size.
	gather:
		for !finished && len(b)+batch.Len() < maxStreamBatch {
			select {
			case next, more := <-events:
				if !more {
					finished = true
					break gather
				}
				batch.Write(b)
				b = out.piece(next.Wire(encodeEvent))
			default:
				break gather
			}
		}
		if batch.Len() > 0 {
			batch.Write(b)
			b = batch.Bytes()
		}
		mu.Lock()
		sent := write(b, finished)
		ended = finished // nothing follows the end, not even a heartbeat
		mu.Unlock()
		batch.Reset()
		if !sent {
			return true
		}
		if finished {
			break
		}
	}
	// The channel closed: terminal event delivered, dropped as too slow,
	// store closed, the client went away, or a heartbeat failed. The end
	// is written under the lock that keeps heartbeats from following it.
	mu.Lock()
	defer mu.Unlock()
	ended = true
	gone := failed || out.gone()
	if !gone && !finished {
		write(nil, true)
	}
	return gone
}

// responseSink writes a stream through net/http's response writer, which
// frames it for the protocol at hand (HTTP/1.0, HTTP/2) and ends it when
// the handler returns.
type responseSink struct {
	w    http.ResponseWriter
	r    *http.Request
	sess *sse.Session
}

func openResponse(w http.ResponseWriter, r *http.Request) (*responseSink, error) {
	sess, err := sse.Upgrade(w, r)
	if err != nil {
		return nil, err
	}
	// Streams last as long as the loop: no write deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	return &responseSink{w: w, r: r, sess: sess}, sess.Flush()
}

// gone: net/http ends the request's context when the client goes away.
func (rs *responseSink) gone() bool { return rs.r.Context().Err() != nil }

func (rs *responseSink) piece(f []byte) []byte { return unchunk(f) }

func (rs *responseSink) cut() {
	_ = http.NewResponseController(rs.w).SetWriteDeadline(time.Unix(1, 0))
}

// send writes b and flushes it, unless the stream ends with b: then net/http
// sends b with the end of the response, in one system call.
func (rs *responseSink) send(b []byte, end bool) error {
	if len(b) > 0 {
		if _, err := rs.w.Write(b); err != nil {
			return err
		}
	}
	if end {
		return nil
	}
	return rs.sess.Flush()
}

// connSink writes an HTTP/1.1 stream to its hijacked connection: the
// response head, each write as one chunked write, then the last chunk, and
// it closes the connection (the head says so). A goroutine reads the
// connection to learn when the client goes away, as net/http does; it
// closes the subscription then, which ends the stream.
type connSink struct {
	conn       net.Conn
	readEnd    chan struct{} // closed when the read goroutine returns
	closing    atomic.Bool   // close began
	clientGone atomic.Bool   // the client closed the connection
	release    func()        // unregisters the stream from Streams
}

// hijack takes over the connection of an HTTP/1.1 request and writes the
// response head, with w's header. It returns nil and no error when the
// request cannot be hijacked; the stream is then written through w. An
// error means the client is gone.
func (s *server) hijack(w http.ResponseWriter, r *http.Request, sub *runs.Subscription) (*connSink, error) {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return nil, nil // HTTP/1.0 has no chunked bodies: net/http ends it by closing
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil
	}
	cs := &connSink{conn: conn, readEnd: make(chan struct{})}
	cs.release = s.streams.add(conn)
	// Streams last as long as the loop: no read or write deadline.
	_ = conn.SetDeadline(time.Time{})
	go cs.read(brw.Reader, sub)

	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	h := w.Header().Clone()
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	if _, err := conn.Write(head.Bytes()); err != nil {
		cs.close()
		return nil, err
	}
	return cs, nil
}

// read reads what the client sends after its request until the connection
// fails or closes. Unless close began, the client is gone: read notes that,
// then closes sub, which ends the stream. It reads through br only for what
// br holds already, so that br's buffer is freed.
func (cs *connSink) read(br *bufio.Reader, sub *runs.Subscription) {
	defer close(cs.readEnd)
	if _, err := br.Discard(br.Buffered()); err == nil {
		var b [64]byte
		for err == nil {
			_, err = cs.conn.Read(b[:])
		}
	}
	if !cs.closing.Load() {
		cs.clientGone.Store(true)
	}
	sub.Close()
}

func (cs *connSink) gone() bool { return cs.clientGone.Load() }

func (cs *connSink) piece(f []byte) []byte { return f }

func (cs *connSink) cut() { _ = cs.conn.SetWriteDeadline(time.Unix(1, 0)) }

func (cs *connSink) send(b []byte, end bool) error {
	if !end {
		_, err := cs.conn.Write(b)
		return err
	}
	bufs := net.Buffers{b, lastChunk}
	_, err := bufs.WriteTo(cs.conn)
	return err
}

// close closes the connection, which sends what was written and then the
// end of the connection, and waits for the read goroutine.
//
// It first yields: when a run ends, all its streams are readied at once to
// write the terminal event, and closing a connection costs more than that
// write (on loopback, the client's side of the teardown runs in these
// system calls too). Yielding lets the other streams write first, which
// halves the time for the terminal event to reach the last of 1000
// subscribers.
func (cs *connSink) close() {
	runtime.Gosched()
	cs.closing.Store(true)
	_ = cs.conn.Close()
	<-cs.readEnd
	cs.release()
}

// Streams keeps account of the event streams that write to their own
// connection: http.Server.Shutdown does not wait for those.
type Streams struct {
	stop  context.Context // ended by Wait when its context ends first
	abort context.CancelFunc

	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0
}

// NewStreams returns an empty Streams.
func NewStreams() *Streams {
	s := &Streams{idle: make(chan struct{})}
	s.stop, s.abort = context.WithCancel(context.Background())
	close(s.idle)
	return s
}

// add counts a stream on conn in until the returned function is called. Once
// Wait gave up, conn is closed at once.
func (s *Streams) add(conn net.Conn) (release func()) {
	s.mu.Lock()
	if s.n == 0 {
		s.idle = make(chan struct{})
	}
	s.n++
	s.mu.Unlock()
	stopWatch := context.AfterFunc(s.stop, func() { _ = conn.Close() })
	return func() {
		stopWatch()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.n--; s.n == 0 {
			close(s.idle)
		}
	}
}

// Wait returns when no stream is left. Streams end once their runs finish
// or the run store closes. If ctx ends first, Wait closes the connections of
// those left, and of any stream that starts later, waits for them to end and
// returns ctx's error.
func (s *Streams) Wait(ctx context.Context) error {
	var err error // ctx's, once streams were cut
	for {
		s.mu.Lock()
		idle, n := s.idle, s.n
		s.mu.Unlock()
		if n == 0 {
			return err
		}
		select {
		case <-idle:
		case <-ctx.Done():
			s.abort() // closes their connections: the streams end
			err = ctx.Err()
			<-idle
		}
	}
}
