package mcpserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sampled/sampled/internal/app"
)

// TestShutdownEndsSessions: an http.Server's Shutdown, which calls
// App.Drain, does not wait for the open streams of MCP sessions.
func TestShutdownEndsSessions(t *testing.T) {
	a, err := app.New(context.Background(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler}
	srv.RegisterOnShutdown(a.Drain)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	c := mcp.NewClient(&mcp.Implementation{Name: "shutdown-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil { // the session's GET stream is open by now
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
}
