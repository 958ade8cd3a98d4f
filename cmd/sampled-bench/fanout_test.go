package main

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestFanoutClient: the fan-out client reads every event on every stream,
// from sampled and from the bare TCP floor, and reports for each a kernel
// arrival time no later than the time it read it.
func TestFanoutClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the fan-out client needs Linux")
	}
	const subscribers, events = 20, 5
	for _, floor := range []bool{false, true} {
		t.Run("floor="+strconv.FormatBool(floor), func(t *testing.T) {
			var (
				pub publisher
				err error
			)
			if floor {
				pub, err = startFloor()
			} else {
				pub, err = startService(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer pub.close()
			type result struct {
				res fanoutResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := subscribeAll(pub.url(), subscribers, events, 30*time.Second)
				done <- result{res, err}
			}()
			for pub.subscribers() < subscribers {
				select {
				case r := <-done:
					t.Fatalf("client ended before subscribing: %v", r.err)
				case <-time.After(5 * time.Millisecond):
				}
			}
			for i := range events {
				data := []byte(`{"t":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `}`)
				if err := pub.publish(i, data, i == events-1); err != nil {
					t.Fatal(err)
				}
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.res.Events != subscribers*events {
				t.Fatalf("%d deliveries, want %d", r.res.Events, subscribers*events)
			}
			for i := range 3 {
				if r.res.Arrival[i] <= 0 || r.res.Arrival[i] > r.res.Read[i] {
					t.Fatalf("arrival %v, read %v: want 0 < arrival <= read", r.res.Arrival, r.res.Read)
				}
			}
		})
	}
}
