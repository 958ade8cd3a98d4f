//go:build !linux

package main

import (
	"errors"
	"time"
)

func subscribeAll(string, int, int, time.Duration) (fanoutResult, error) {
	return fanoutResult{}, errors.New("the fan-out client needs Linux (epoll, kernel receive timestamps)")
}

func cpuTime() (int64, error) { return 0, errors.New("no CPU accounting on this system") }
