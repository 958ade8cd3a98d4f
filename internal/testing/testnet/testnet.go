// Package testnet gives tests network addresses with a known behaviour.
package testnet

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusingAddr returns a loopback address ("127.0.0.1:port") that refuses
// connections until the test ends: its port is bound but not listening, so
// no other server (of this test or of another process) can take it, as one
// could take a port a test only found free and closed.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("bound to %T", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in.Port)
}
