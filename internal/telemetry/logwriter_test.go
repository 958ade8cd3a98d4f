package telemetry

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// writes records each write it is given, and signals one on wrote.
type writes struct {
	mu    sync.Mutex
	all   [][]byte
	wrote chan struct{}
}

func newWrites() *writes { return &writes{wrote: make(chan struct{}, 1024)} }

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.all = append(w.all, bytes.Clone(p))
	w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *writes) snapshot() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.all...)
}

func line(i int) []byte {
	return fmt.Appendf(nil, "{\"msg\":\"request\",\"n\":%d,\"pad\":%q}\n", i, strings.Repeat("x", 200))
}

func TestLogWriterWritesLinesTogetherAndWhole(t *testing.T) {
	w := newWrites()
	l := NewLogWriter(w, time.Hour) // only a full buffer writes, in this test
	var want bytes.Buffer
	const n = 1000 // about 240 KB: several buffers' worth
	for i := range n {
		p := line(i)
		want.Write(p)
		if _, err := l.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := w.snapshot()
	if len(got) >= n/10 {
		t.Errorf("%d lines took %d writes; want them held together", n, len(got))
	}
	var all bytes.Buffer
	for _, p := range got {
		if len(p) == 0 || p[len(p)-1] != '\n' {
			t.Fatalf("a write ends inside a line: %q", p[max(0, len(p)-40):])
		}
		all.Write(p)
	}
	if !bytes.Equal(all.Bytes(), want.Bytes()) {
		t.Error("what was written is not the lines, in order")
	}
}

func TestLogWriterWritesAHeldLineSoon(t *testing.T) {
	w := newWrites()
	l := NewLogWriter(w, 10*time.Millisecond)
	defer l.Close()
	if _, err := l.Write(line(1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("a held line was not written without another write")
	}
	// The next line is held again, and written again without help.
	if _, err := l.Write(line(2)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the second held line was not written")
	}
	if got := w.snapshot(); len(got) != 2 || !bytes.Equal(got[1], line(2)) {
		t.Errorf("writes = %q", got)
	}
}

func TestLogWriterCloseWritesWhatIsHeldThenEachLine(t *testing.T) {
	w := newWrites()
	l := NewLogWriter(w, time.Hour)
	_, _ = l.Write(line(1))
	if got := w.snapshot(); len(got) != 0 {
		t.Fatalf("written before Close: %q", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.snapshot(); len(got) != 1 || !bytes.Equal(got[0], line(1)) {
		t.Fatalf("Close wrote %q", got)
	}
	_, _ = l.Write(line(2))
	if got := w.snapshot(); len(got) != 2 || !bytes.Equal(got[1], line(2)) {
		t.Fatalf("a line after Close: writes %q", got)
	}
}

func TestLogWriterConcurrentLinesStayWhole(t *testing.T) {
	w := newWrites()
	l := NewLogWriter(w, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				_, _ = l.Write(line(g*1000 + i))
			}
		})
	}
	wg.Wait()
	_ = l.Close()
	var all bytes.Buffer
	for _, p := range w.snapshot() {
		all.Write(p)
	}
	lines := strings.Split(strings.TrimSuffix(all.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines written, want %d", len(lines), 8*200)
	}
	seen := map[string]bool{}
	for _, s := range lines {
		if !strings.HasPrefix(s, `{"msg":"request"`) || !strings.HasSuffix(s, `"}`) || seen[s] {
			t.Fatalf("a line was torn or repeated: %q", s)
		}
		seen[s] = true
	}
}
