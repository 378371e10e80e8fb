// Command mcpfloor is the floor model of BenchmarkMCP: an MCP server on
// the official Go SDK over stdio (run with kbox mcp's GOGC), whose
// read_file answers from memory with a result of read_file's shape (the
// text as the content, and the structured result without it), whose
// read_text answers the text alone (the least an answer carrying the
// bytes can be), and whose noop does nothing. What kbox's read_file takes
// beyond the first is kbox's: the session's socket, the kernel's read and
// kbox's handler.
package main

import (
	"context"
	"log"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type readIn struct {
	Path string `json:"path"`
	Size int    `json:"size"`
}

type readOut struct {
	Path          string `json:"path"`
	Encoding      string `json:"encoding"`
	ContentBase64 string `json:"content_base64,omitempty"`
	Bytes         int    `json:"bytes"`
	Size          int64  `json:"size"`
	EOF           bool   `json:"eof"`
}

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpfloor", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file"}, func(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, readOut, error) {
		text := strings.Repeat("x", in.Size)
		out := readOut{Path: in.Path, Encoding: "text", Bytes: in.Size, Size: int64(in.Size), EOF: true}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_text"}, func(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Size)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return nil, struct{}{}, nil
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
