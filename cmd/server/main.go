// Command server runs sampled, the LLM sampling service.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sampled/sampled/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sampled:", err)
		os.Exit(1)
	}
}

// serverConfig is the service configuration read from flags and the environment.
type serverConfig struct {
	addr             string
	maxBodyBytes     int64
	defaultMaxTokens int
	shutdownTimeout  time.Duration
	logFormat        string
}

func readConfig(args []string, getenv func(string) string, stderr io.Writer) (serverConfig, error) {
	c := serverConfig{addr: ":8080", maxBodyBytes: 4 << 20, defaultMaxTokens: 1024, shutdownTimeout: 30 * time.Second, logFormat: "json"}
	if v := getenv("SAMPLED_ADDR"); v != "" {
		c.addr = v
	}
	if v := getenv("SAMPLED_LOG_FORMAT"); v != "" {
		c.logFormat = v
	}
	for _, e := range []struct {
		name string
		dst  *int64
	}{{"SAMPLED_MAX_BODY_BYTES", &c.maxBodyBytes}} {
		if v := getenv(e.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return c, fmt.Errorf("%s: want a positive number of bytes, got %q", e.name, v)
			}
			*e.dst = n
		}
	}
	if v := getenv("SAMPLED_MAX_TOKENS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("SAMPLED_MAX_TOKENS: want a positive integer, got %q", v)
		}
		c.defaultMaxTokens = n
	}
	fs := flag.NewFlagSet("sampled", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", c.addr, "listen address (env SAMPLED_ADDR)")
	fs.Int64Var(&c.maxBodyBytes, "max-body-bytes", c.maxBodyBytes, "largest request body (env SAMPLED_MAX_BODY_BYTES)")
	fs.StringVar(&c.logFormat, "log-format", c.logFormat, "json or text (env SAMPLED_LOG_FORMAT)")
	if len(args) > 0 {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.logFormat != "json" && c.logFormat != "text" {
		return c, fmt.Errorf("log format: want json or text, got %q", c.logFormat)
	}
	return c, nil
}

// run starts the service and blocks until ctx ends, then drains in-flight
// requests. It writes "listening on <addr>" to stdout once it accepts
// connections.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := readConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	var logHandler slog.Handler = slog.NewJSONHandler(stderr, nil)
	if cfg.logFormat == "text" {
		logHandler = slog.NewTextHandler(stderr, nil)
	}
	log := slog.New(logHandler)

	a, err := app.New(ctx, app.Options{Getenv: getenv, Logger: log, MaxBodyBytes: cfg.maxBodyBytes, DefaultMaxTokens: cfg.defaultMaxTokens})
	if err != nil {
		return err
	}
	defer a.Close()

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		// Long enough for a guaranteed helper's attempts; SSE streams set
		// their own deadlines.
		WriteTimeout: 15 * time.Minute,
		IdleTimeout:  120 * time.Second,
		BaseContext:  func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// At shutdown the running loops are cancelled and record their
	// terminal events, which their streams write before they end; the run
	// store's closing ends the other streams. Shutdown waits for them.
	srv.RegisterOnShutdown(a.Drain)
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	log.Info("listening", "addr", ln.Addr().String(), "models", len(a.Catalog.Models()), "default", a.Catalog.Default().ID())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
