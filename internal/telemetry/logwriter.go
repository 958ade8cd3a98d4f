package telemetry

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logBufferBytes is the size of a LogWriter's buffer.
const logBufferBytes = 32 << 10

// LogFlushEvery is the delay cmd/server gives its LogWriter (and the
// bench's gateway children, which log as cmd/server does).
const LogFlushEvery = 100 * time.Millisecond

// LogWriter holds log lines for w and writes them together: when the next
// line would not fit its buffer, and otherwise within the delay given to
// NewLogWriter after the first line it holds. A busy service so writes a
// few times a second instead of once a request, each write a system call;
// a quiet one sees its lines that delay late at most. Close writes what is
// held; what a crash interrupts (at most the last delay's lines) is lost.
//
// A line, one Write, is never split between two writes to w unless it is
// larger than the buffer. LogWriter is safe for concurrent use.
type LogWriter struct {
	mu     sync.Mutex
	buf    *bufio.Writer
	every  time.Duration
	timer  *time.Timer
	armed  bool
	closed bool
}

// NewLogWriter returns a LogWriter for w that writes a line it holds
// within every.
func NewLogWriter(w io.Writer, every time.Duration) *LogWriter {
	l := &LogWriter{buf: bufio.NewWriterSize(w, logBufferBytes), every: every}
	l.timer = time.AfterFunc(time.Hour, func() { _ = l.Flush() })
	l.timer.Stop()
	return l
}

// Write holds p, a log line, writing what is held first when p would not
// fit beside it. After Close, p is written at once.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(p) > l.buf.Available() && l.buf.Buffered() > 0 {
		if err := l.buf.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := l.buf.Write(p)
	switch {
	case err != nil:
		return n, err
	case l.closed:
		return n, l.buf.Flush()
	case !l.armed && l.buf.Buffered() > 0:
		l.armed = true
		l.timer.Reset(l.every)
	}
	return n, nil
}

// Flush writes what is held.
func (l *LogWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	return l.buf.Flush()
}

// Close writes what is held; later lines are written as they come.
func (l *LogWriter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.timer.Stop()
	return l.Flush()
}
