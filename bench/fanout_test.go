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
			var res fanoutResult
			ended := make(chan error, 1)
			go func() {
				var err error
				res, err = subscribeAll(pub.url(), subscribers, events, 30*time.Second)
				ended <- err
			}()
			if err := waitSubscribers(pub, subscribers, ended); err != nil {
				t.Fatal(err)
			}
			if _, err := publishPaced(context.Background(), pub, events, time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := <-ended; err != nil {
				t.Fatal(err)
			}
			if res.Events != subscribers*events {
				t.Fatalf("%d deliveries, want %d", res.Events, subscribers*events)
			}
			for i := range 3 {
				if res.Arrival[i] <= 0 || res.Arrival[i] > res.Read[i] {
					t.Fatalf("arrival %v, read %v: want 0 < arrival <= read", res.Arrival, res.Read)
				}
				if res.Terminal[i] <= 0 || res.Terminal[i] > res.Arrival[2] {
					t.Fatalf("terminal %v, arrival %v: want 0 < terminal <= the latest arrival", res.Terminal, res.Arrival)
				}
			}
		})
	}
}
