// Command mcpserver is the MCP server of the tools package's tests. It
// serves over stdio, or over streamable HTTP with -http ADDR (it then prints
// its URL, http://ADDR/mcp, on stdout). Its tool list comes in pages of two,
// so that clients must paginate.
//
// Tools: echo {text}; add {a, b} (structuredContent {sum}); fail (an isError
// result); slow {ms, marker} (writes "started" to the marker file, then
// "cancelled" if its call is cancelled before ms have passed); crash (exits
// with status 3); add_tool (registers the tool "late", so that clients get
// notifications/tools/list_changed); pid (structuredContent {pid}); getenv
// {text} (the value of that environment variable; without text, the whole
// environment, one NAME=value a line, sorted).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

func run() error {
	httpAddr := flag.String("http", "", "serve streamable HTTP on `addr` instead of stdio")
	refuse := flag.String("refuse", "", "exit at once with status 1 while `file` exists")
	flag.Parse()
	if *refuse != "" {
		if _, err := os.Stat(*refuse); err == nil {
			return fmt.Errorf("refusing to start: %s exists", *refuse)
		}
	}
	srv := newServer()
	if *httpAddr == "" {
		return srv.Run(context.Background(), &mcp.StdioTransport{})
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	return http.Serve(ln, mux)
}

type textIn struct {
	Text string `json:"text"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type slowIn struct {
	MS     int    `json:"ms"`
	Marker string `json:"marker"`
}

type pidOut struct {
	PID int `json:"pid"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func echo(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
	return text(in.Text), nil, nil
}

func newServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpserver", Version: "test"}, &mcp.ServerOptions{PageSize: 2})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text."}, echo)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			sum := in.A + in.B
			return text(strconv.FormatFloat(sum, 'f', -1, 64)), addOut{Sum: sum}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Fail."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			res := text("deliberate failure")
			res.IsError = true
			return res, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Wait ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(in.Marker, []byte("started"), 0o600); err != nil {
				return nil, nil, err
			}
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text("done"), nil, nil
			case <-ctx.Done():
				if err := os.WriteFile(in.Marker, []byte("cancelled"), 0o600); err != nil {
					return nil, nil, err
				}
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "Exit with status 3."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "add_tool", Description: "Add the tool late."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(srv, &mcp.Tool{Name: "late", Description: "Added at run time."}, echo)
			return text("added"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "pid", Description: "Report the process ID."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, pidOut, error) {
			return nil, pidOut{PID: os.Getpid()}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "getenv", Description: "Report an environment variable."},
		func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			if in.Text == "" {
				env := os.Environ()
				slices.Sort(env)
				return text(strings.Join(env, "\n")), nil, nil
			}
			return text(os.Getenv(in.Text)), nil, nil
		})
	return srv
}
