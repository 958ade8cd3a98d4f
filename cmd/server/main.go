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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/sampled/sampled/internal/app"
	"github.com/sampled/sampled/internal/config"
	"github.com/sampled/sampled/internal/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sampled:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds the drain of in-flight requests at shutdown.
const shutdownTimeout = 30 * time.Second

// readConfig reads the configuration from the environment (config.Load is
// its one reader) and lets flags override the server settings.
func readConfig(args []string, getenv func(string) string, stderr io.Writer) (*config.Config, error) {
	c, err := config.Load(getenv, nil)
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("sampled", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Server.Addr, "addr", c.Server.Addr, "listen address (env SAMPLED_ADDR)")
	fs.Int64Var(&c.Server.MaxBodyBytes, "max-body-bytes", c.Server.MaxBodyBytes, "largest request body, 0 for the default (env SAMPLED_MAX_BODY_BYTES)")
	fs.StringVar(&c.Server.LogFormat, "log-format", c.Server.LogFormat, "json or text (env SAMPLED_LOG_FORMAT)")
	if len(args) > 0 {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return c, c.Server.Check()
}

// loopback reports whether a listener's address is a loopback one: an
// unspecified address (":8080") listens on every interface.
// version is the module's version the binary was built from, "(devel)"
// when built from a checkout.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "(devel)"
}

func loopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// run starts the service and blocks until ctx ends, then drains in-flight
// requests. It writes "listening on <addr>" to stdout once it accepts
// connections.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := readConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	// Log lines are written together, a few times a second at most, not
	// each with a system call of its own; what is held is written at the end.
	logs := telemetry.NewLogWriter(stderr, telemetry.LogFlushEvery)
	defer logs.Close()
	var logHandler slog.Handler = slog.NewJSONHandler(logs, nil)
	if cfg.Server.LogFormat == "text" {
		logHandler = slog.NewTextHandler(logs, nil)
	}
	// Tracing is on when an OTLP endpoint is set (OTEL_*); its spans are
	// flushed at the end.
	stopTracing, err := telemetry.Setup(ctx, getenv, version())
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stopTracing(fctx)
	}()
	if telemetry.Enabled() {
		logHandler = telemetry.LogHandler(logHandler) // trace_id and span_id on each line
	}
	log := slog.New(logHandler)
	// go-redis logs through one logger per process: set here, once.
	app.RedisLogs(log)

	a, err := app.New(ctx, app.Options{Config: cfg, Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()

	ln, err := net.Listen("tcp", cfg.Server.Addr)
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
	var models []string
	for _, m := range a.Catalog.Models() {
		models = append(models, m.ID())
	}
	// What answers, said once at start: never a surprise offline answer.
	log.Info("listening", "addr", ln.Addr().String(), "models", models, "default", a.Catalog.Default().ID(), "apiKeys", len(cfg.APIKeys),
		"tracing", telemetry.Enabled())
	if len(cfg.APIKeys) == 0 && !loopback(ln.Addr()) {
		log.Warn("listening beyond loopback without API keys: whoever reaches this address can sample and run loops; configure apiKeys (README, Access) or listen on 127.0.0.1",
			"addr", ln.Addr().String())
	}
	_ = logs.Flush() // the start-up lines are read before the first request

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
