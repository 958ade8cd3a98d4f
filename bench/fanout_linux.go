package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// subscriber is one client connection of the fan-out measurement.
type subscriber struct {
	fd      int
	pending []byte // bytes after the last complete line
	head    bool   // status line checked
	got     int    // events read
}

// subscribeAll opens n SSE connections to rawURL and reads events on all of
// them from one thread with epoll, until each has read events events. It
// is deliberately lean (raw sockets, no HTTP client, no goroutines), so
// that the process spends as little as possible of the CPU the service
// shares with it. Every data line holds {"t":<publish time, Unix ns>}.
func subscribeAll(rawURL string, n, events int, timeout time.Duration) (fanoutResult, error) {
	var res fanoutResult
	u, err := url.Parse(rawURL)
	if err != nil {
		return res, err
	}
	ta, err := net.ResolveTCPAddr("tcp4", u.Host)
	if err != nil {
		return res, err
	}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	req := []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAccept: text/event-stream\r\n\r\n")

	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return res, err
	}
	defer syscall.Close(ep)
	subs := make(map[int32]*subscriber, n)
	defer func() {
		for fd := range subs {
			syscall.Close(int(fd))
		}
	}()
	for range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return res, err
		}
		subs[int32(fd)] = &subscriber{fd: fd}
		if err := syscall.Connect(fd, sa); err != nil {
			return res, fmt.Errorf("connect: %w", err)
		}
		// The kernel stamps what arrives with the time it arrived.
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1); err != nil {
			return res, err
		}
		if _, err := syscall.Write(fd, req); err != nil {
			return res, err
		}
		if err := syscall.SetNonblock(fd, true); err != nil {
			return res, err
		}
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return res, err
		}
	}

	cpu0, err := cpuTime()
	if err != nil {
		return res, err
	}
	read := make([]int64, 0, n*events)
	last := make(map[int64]int64, events) // publish time → latest arrival
	arrival := make([]int64, 0, n*events)
	terminal := make([]int64, 0, n) // arrival of the last event
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(16))
	evs := make([]syscall.EpollEvent, 256)
	deadline := time.Now().Add(timeout)
	prefix := []byte(`data: {"t":`)
	for len(subs) > 0 {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d subscribers still reading after %s", len(subs), timeout)
		}
		k, err := syscall.EpollWait(ep, evs, 100)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return res, err
		}
		for _, e := range evs[:k] {
			s := subs[e.Fd]
			nr, oobn, _, _, err := syscall.Recvmsg(s.fd, buf, oob, 0)
			now := time.Now().UnixNano()
			if errors.Is(err, syscall.EAGAIN) {
				continue
			}
			if err != nil {
				return res, err
			}
			if nr == 0 {
				return res, fmt.Errorf("a stream ended after %d of %d events", s.got, events)
			}
			arrived := int64(0)
			if cms, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, cm := range cms {
					if cm.Header.Level == syscall.SOL_SOCKET && cm.Header.Type == syscall.SCM_TIMESTAMPNS && len(cm.Data) >= 16 {
						arrived = int64(binary.NativeEndian.Uint64(cm.Data[0:8]))*1e9 + int64(binary.NativeEndian.Uint64(cm.Data[8:16]))
					}
				}
			}
			s.pending = append(s.pending, buf[:nr]...)
			for {
				i := bytes.IndexByte(s.pending, '\n')
				if i < 0 {
					break
				}
				line := s.pending[:i]
				if !s.head {
					if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
						return res, fmt.Errorf("response %q", line)
					}
					s.head = true
				}
				if bytes.HasPrefix(line, prefix) {
					t, err := strconv.ParseInt(string(bytes.TrimSuffix(line[len(prefix):], []byte("}"))), 10, 64)
					if err != nil {
						return res, fmt.Errorf("data line %q", line)
					}
					if arrived == 0 {
						return res, errors.New("no receive timestamp from the kernel")
					}
					read = append(read, now-t)
					arrival = append(arrival, arrived-t)
					if s.got == events-1 {
						terminal = append(terminal, arrived-t)
					}
					last[t] = max(last[t], arrived-t)
					s.got++
				}
				s.pending = s.pending[i+1:]
			}
			if s.got == events {
				syscall.Close(s.fd)
				delete(subs, e.Fd)
			}
		}
	}
	pct := func(l []int64) [3]int64 {
		slices.Sort(l)
		return [3]int64{l[len(l)/2], l[len(l)*99/100], l[len(l)-1]}
	}
	cpu1, err := cpuTime()
	if err != nil {
		return res, err
	}
	spread := make([]int64, 0, len(last))
	for _, d := range last {
		spread = append(spread, d)
	}
	res.Events = len(read)
	res.Read, res.Arrival, res.Last, res.Terminal = pct(read), pct(arrival), pct(spread), pct(terminal)
	res.CPU = cpu1 - cpu0
	return res, nil
}

// cpuTime is the CPU time (user and system) this process used so far, in
// nanoseconds.
func cpuTime() (int64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), nil
}
