// Command healthcheck probes sampled's health endpoint for container
// healthchecks. The runtime image is distroless (no shell, no curl), so the
// image ships this small static binary instead:
//
//	healthcheck [url]
//
// It sends one GET to url, bounded by a 2 second timeout, and exits 0 when
// the answer is 200 OK and 1 otherwise. Without a url it probes
// http://127.0.0.1:8080/healthz, or the address of SAMPLED_ADDR when that
// variable is set (a healthcheck runs with the container's environment,
// which is the service's), so a service moved to another port is still
// probed where it listens.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// defaultURL is probed when neither an argument nor SAMPLED_ADDR says otherwise.
const defaultURL = "http://127.0.0.1:8080/healthz"

// timeout bounds the whole probe: connecting, sending and reading the answer.
const timeout = 2 * time.Second

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// run probes the target chosen from args and getenv and reports why it is
// not healthy, or nil when it answered 200.
func run(args []string, getenv func(string) string) error {
	url, err := target(args, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return probe(ctx, &http.Client{Timeout: timeout}, url)
}

// target returns the URL to probe: the only argument when there is one,
// else /healthz at SAMPLED_ADDR (loopback when it names every interface),
// else defaultURL.
func target(args []string, getenv func(string) string) (string, error) {
	switch len(args) {
	case 0:
	case 1:
		return args[0], nil
	default:
		return "", fmt.Errorf("usage: healthcheck [url], got %d arguments", len(args))
	}
	addr := getenv("SAMPLED_ADDR")
	if addr == "" {
		return defaultURL, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("SAMPLED_ADDR %q: no port to probe", addr)
	}
	// A service listening on every interface (":8080", "0.0.0.0:8080",
	// "[::]:8080") is reached on loopback; one bound to a single address
	// only there.
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// probe sends one GET to url and succeeds only on 200 OK.
func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Drain a little so the exchange completes cleanly; the content is not
	// judged, only the status.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
