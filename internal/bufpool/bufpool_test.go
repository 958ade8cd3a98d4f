package bufpool

import "testing"

// TestPool: a buffer comes back empty, and one grown past Max is never
// handed out again.
func TestPool(t *testing.T) {
	p := Pool{Max: 1 << 10}
	big := p.Get()
	big.Grow(4 << 10)
	p.Put(big)
	for range 100 {
		b := p.Get()
		if b == big {
			t.Fatal("a buffer grown past Max came back")
		}
		if b.Len() != 0 {
			t.Fatalf("Get returned %d bytes, want an empty buffer", b.Len())
		}
		b.WriteString("some bytes")
		p.Put(b)
	}
}
