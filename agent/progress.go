package agent

import (
	"context"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that gives a run a progress token gets the run's output as it
// comes: one progress notification per chunk read from the program's
// stdout or stderr, the chunk as its message, the stream's name in its
// _meta ("stream"), and the bytes of both streams so far as its progress.

// withProgress wraps a run's output writers to notify req's client,
// when it asked for progress; else it returns them as they are.
func withProgress(ctx context.Context, req *mcp.CallToolRequest, stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if req == nil || req.Session == nil || req.Params == nil {
		return stdout, stderr
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return stdout, stderr
	}
	p := &progress{ctx: ctx, session: req.Session, token: token}
	return &progressWriter{p: p, w: stdout, stream: "stdout"}, &progressWriter{p: p, w: stderr, stream: "stderr"}
}

type progress struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any
	mu      sync.Mutex
	total   int64
}

type progressWriter struct {
	p      *progress
	w      io.Writer
	stream string
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	p := pw.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += int64(n)
	// A client gone or slow loses notifications, never output.
	p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Message: string(b[:n]),
		Progress: float64(p.total), Meta: mcp.Meta{"stream": pw.stream}})
	return n, err
}
