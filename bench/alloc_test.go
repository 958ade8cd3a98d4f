package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The Alloc benchmarks send one plain request at a time over real HTTP
// in one process, to count what each gateway allocates for it: the
// garbage collector's work follows the bytes allocated. Direct is the
// client and the fake alone; a gateway's own share is its figure less
// Direct's. Run them with
//
//	go test -run '^$' -bench Alloc -benchmem ./bench
func BenchmarkAllocDirect(b *testing.B) {
	up := httptest.NewServer(newFakeUpstream(0))
	b.Cleanup(up.Close)
	modes, err := sideModes()
	if err != nil {
		b.Fatal(err)
	}
	benchPost(b, up.URL+"/v1/chat/completions", modes[0].direct)
}

func BenchmarkAllocFloor(b *testing.B) {
	up := httptest.NewServer(newFakeUpstream(0))
	b.Cleanup(up.Close)
	gw := httptest.NewServer(newFloorGateway(up.URL + "/v1/chat/completions"))
	b.Cleanup(gw.Close)
	benchPlain(b, gw.URL)
}

func BenchmarkAllocSampled(b *testing.B) {
	up := httptest.NewServer(newFakeUpstream(0))
	b.Cleanup(up.Close)
	a, err := newSampled(b.Context(), up.URL, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	gw := httptest.NewServer(a.Handler)
	b.Cleanup(gw.Close)
	benchPlain(b, gw.URL)
}

// benchPlain posts plain mode's body to a gateway's /v1/sample.
func benchPlain(b *testing.B, base string) {
	modes, err := sideModes()
	if err != nil {
		b.Fatal(err)
	}
	benchPost(b, base+"/v1/sample", modes[0].body)
}

func benchPost(b *testing.B, url string, body []byte) {
	c := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

func BenchmarkAllocContract(b *testing.B) {
	up := httptest.NewServer(newFakeUpstream(0))
	b.Cleanup(up.Close)
	gw := httptest.NewServer(newContractFloor(up.URL+"/v1/chat/completions", io.Discard))
	b.Cleanup(gw.Close)
	benchPlain(b, gw.URL)
}
