// Command samplingpeer is a go-sdk MCP server whose tools ask their client
// to sample: the peer of the MCP host tests. It serves over stdio, or over
// streamable HTTP with -http ADDR (it then prints its URL, http://ADDR/mcp,
// on stdout).
//
// Tools:
//   - sample {params, mode}: sends params (MCP CreateMessageRequestParams)
//     as a sampling request, pushed ("push", the default) or as an "input
//     required" result ("input"; go-sdk pushes it to clients older than
//     2026-07-28), and answers structuredContent {result} with the client's
//     CreateMessageResult, or {code, message} (isError) with its JSON-RPC
//     error.
//   - nest {}: pushes a request for a client-run loop over every client
//     tool named "*__nest" (at most 2 iterations), and answers as sample.
//   - progress_seen {token}: structuredContent {messages}: the messages of
//     the progress notifications received so far for token.
//   - slow_sample {marker}: pushes a request, writes "started" to the marker
//     file, and "cancelled" once its own call is cancelled.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "samplingpeer:", err)
		os.Exit(1)
	}
}

func run() error {
	httpAddr := flag.String("http", "", "serve streamable HTTP on `addr` instead of stdio")
	stateless := flag.Bool("stateless", false, "serve streamable HTTP statelessly")
	flag.Parse()
	p := &peer{progress: map[string][]string{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "samplingpeer", Version: "1"}, &mcp.ServerOptions{
		ProgressNotificationHandler: p.onProgress,
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample", Description: "Ask the client to sample."}, p.sample)
	mcp.AddTool(srv, &mcp.Tool{Name: "nest", Description: "Ask the client for a loop over the nest tools."}, p.nest)
	mcp.AddTool(srv, &mcp.Tool{Name: "progress_seen", Description: "Progress notifications received."}, p.progressSeen)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow_sample", Description: "Ask the client to sample, and report cancellation."}, p.slowSample)
	if *httpAddr == "" {
		return srv.Run(context.Background(), &mcp.StdioTransport{})
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: *stateless}))
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	return http.Serve(ln, mux)
}

type peer struct {
	mu       sync.Mutex
	progress map[string][]string // messages by progress token
}

func (p *peer) onProgress(_ context.Context, req *mcp.ProgressNotificationServerRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := fmt.Sprint(req.Params.ProgressToken)
	p.progress[tok] = append(p.progress[tok], req.Params.Message)
}

type sampleIn struct {
	Params map[string]any `json:"params" jsonschema:"MCP CreateMessageRequestParams"`
	Mode   string         `json:"mode,omitempty" jsonschema:"push (default) or input"`
}

// sampleOut is a tool's answer: the result, or the JSON-RPC error, with
// the session's protocol version and the sampling capability the client
// declared.
type sampleOut struct {
	Result          any    `json:"result,omitempty"`
	Code            int64  `json:"code,omitempty"`
	Message         string `json:"message,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
	Sampling        any    `json:"sampling,omitempty"`
}

func answer(ss *mcp.ServerSession, res *mcp.CreateMessageWithToolsResult, err error) (*mcp.CallToolResult, sampleOut, error) {
	var out sampleOut
	if ip := ss.InitializeParams(); ip != nil {
		out.ProtocolVersion = ip.ProtocolVersion
		if ip.Capabilities != nil && ip.Capabilities.Sampling != nil {
			out.Sampling = ip.Capabilities.Sampling
		}
	}
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			return nil, sampleOut{}, err
		}
		out.Code, out.Message = we.Code, we.Message
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d: %s", we.Code, we.Message)}}}, out, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, sampleOut{}, err
	}
	out.Result = json.RawMessage(b)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, out, nil
}

func (p *peer) sample(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, sampleOut, error) {
	var params mcp.CreateMessageWithToolsParams
	b, err := json.Marshal(in.Params)
	if err == nil {
		err = json.Unmarshal(b, &params)
	}
	if err != nil {
		return nil, sampleOut{}, fmt.Errorf("params: %w", err)
	}
	if in.Mode != "input" {
		res, err := req.Session.CreateMessageWithTools(ctx, &params)
		return answer(req.Session, res, err)
	}
	if len(req.Params.InputResponses) == 0 {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"sample": &params}, RequestState: "sampling"}, sampleOut{}, nil
	}
	res, ok := req.Params.InputResponses["sample"].(*mcp.CreateMessageWithToolsResult)
	if !ok {
		return nil, sampleOut{}, fmt.Errorf("input response %T, want a CreateMessageWithToolsResult", req.Params.InputResponses["sample"])
	}
	return answer(req.Session, res, nil)
}

func (p *peer) nest(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, sampleOut, error) {
	params := &mcp.CreateMessageWithToolsParams{
		Meta:      mcp.Meta{"maxIterations": 2, "allowedToolPatterns": []string{"*__nest"}},
		MaxTokens: 200,
		Messages:  []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{&mcp.TextContent{Text: "Please nest once more."}}}},
	}
	res, err := req.Session.CreateMessageWithTools(ctx, params)
	return answer(req.Session, res, err)
}

type progressIn struct {
	Token string `json:"token"`
}

type progressOut struct {
	Messages []string `json:"messages"`
}

func (p *peer) progressSeen(_ context.Context, _ *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, progressOut, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nil, progressOut{Messages: append([]string{}, p.progress[in.Token]...)}, nil
}

type slowIn struct {
	Marker string `json:"marker"`
}

func (p *peer) slowSample(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, sampleOut, error) {
	params := &mcp.CreateMessageWithToolsParams{
		MaxTokens: 100,
		Messages:  []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{&mcp.TextContent{Text: "Take your time."}}}},
	}
	done := make(chan struct{})
	var (
		res *mcp.CreateMessageWithToolsResult
		err error
	)
	go func() {
		defer close(done)
		res, err = req.Session.CreateMessageWithTools(ctx, params)
	}()
	if werr := os.WriteFile(in.Marker, []byte("started"), 0o644); werr != nil {
		return nil, sampleOut{}, werr
	}
	<-done
	if ctx.Err() != nil {
		if werr := os.WriteFile(in.Marker, []byte("cancelled"), 0o644); werr != nil {
			return nil, sampleOut{}, werr
		}
	}
	return answer(req.Session, res, err)
}
