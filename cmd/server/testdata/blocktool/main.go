// Command blocktool is an MCP server, over stdio, for the replica tests of
// cmd/server: its one tool, wait, answers only when its call is cancelled,
// so a loop that calls it runs until it is cancelled or its replica dies.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "blocktool", Version: "test"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "Wait until the call is cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "blocktool:", err)
		os.Exit(1)
	}
}
