package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addBulkTool registers a tool whose result carries a file's bytes
// (read_file). mcp.AddTool would marshal the result, decode it again to
// check it against the output schema and marshal it once more: three
// passes over the bytes before the SDK's own encoding of the answer. The
// result here is kbox's own struct, whose schema is derived from that
// struct, so it is marshalled once and not checked again. The arguments
// are checked against the input schema, as mcp.AddTool does, and a
// handler's error is the result's isError, as there.
func addBulkTool[In, Out any](srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	inSchema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
	}
	outSchema, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", t.Name, err))
	}
	resolved, err := inSchema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
	}
	tt := *t
	tt.InputSchema, tt.OutputSchema = inSchema, outSchema
	srv.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		failed := func(err error) (*mcp.CallToolResult, error) {
			var res mcp.CallToolResult
			res.SetError(err)
			return &res, nil
		}
		args := map[string]any{}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return failed(fmt.Errorf("unmarshaling arguments: %w", err))
			}
		}
		if err := resolved.Validate(args); err != nil {
			return failed(fmt.Errorf("validating \"arguments\": %v", err))
		}
		var in In
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return failed(err)
			}
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return failed(err)
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		res.StructuredContent = json.RawMessage(b)
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		}
		return res, nil
	})
}
