package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/kbox-project/kbox/agent"
	"github.com/kbox-project/kbox/web"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

const mcpUsage = `usage: kbox mcp [--image IMAGE] [--audit FILE] [--listen ADDR:PORT [--token TOKEN]]

Serve agents' tool calls over the Model Context Protocol (docs/agents.md):
run, session_open, session_close, read_file, write_file, list_dir, stat
and kernel_read. On stdin/stdout by default.

  --image IMAGE        the image for calls that name none
  --audit FILE         every run appends to this hash-chained audit log
  --listen ADDR:PORT   streamable HTTP at http://ADDR:PORT/mcp instead of
                       stdio; every request needs "Authorization: Bearer
                       TOKEN"
  --token TOKEN        the bearer token (default $KBOX_MCP_TOKEN, else a
                       random one printed on stderr)
  --tmp-dir DIR        where sessions' images live (default $TMPDIR)
  -h, --help           this help
`

func runMCP(args []string) int {
	var cfg agent.Config
	var listen, token string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		needVal := func() bool {
			if hasVal {
				return true
			}
			if i+1 >= len(args) {
				return false
			}
			i++
			val = args[i]
			return true
		}
		switch name {
		case "-h", "--help":
			fmt.Print(mcpUsage)
			return 0
		case "--image", "--audit", "--listen", "--token", "--tmp-dir":
			if !needVal() || val == "" {
				fmt.Fprintf(os.Stderr, "kbox: %s needs a value\n%s", name, mcpUsage)
				return exitUsage
			}
			switch name {
			case "--image":
				cfg.Image = val
			case "--audit":
				cfg.Audit = val
			case "--listen":
				listen = val
			case "--token":
				token = val
			case "--tmp-dir":
				cfg.TmpDir = val
			}
		default:
			fmt.Fprintf(os.Stderr, "kbox: unknown mcp option %q\n%s", a, mcpUsage)
			return exitUsage
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cfg.Kbox, cfg.Version = self, version
	if cfg.Image != "" {
		if fi, err := os.Stat(cfg.Image); err != nil || !fi.Mode().IsRegular() {
			return fail(usagef("--image %s: not an image file", cfg.Image))
		}
	}
	s := agent.New(cfg)
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer stop()
	if listen == "" {
		if token != "" {
			return fail(usagef("--token is for --listen"))
		}
		err := s.MCP().Run(ctx, &mcp.StdioTransport{})
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return fail(fmt.Errorf("mcp: %w", err))
		}
		return 0
	}
	if token == "" {
		token = os.Getenv("KBOX_MCP_TOKEN")
	}
	if token == "" {
		var b [16]byte
		rand.Read(b[:])
		token = hex.EncodeToString(b[:])
		fmt.Fprintf(os.Stderr, "kbox: mcp token %s\n", token)
	}
	srv := s.MCP()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", bearer(token, h))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fail(fmt.Errorf("mcp: %w", err))
	}
	host, _, _ := net.SplitHostPort(listen)
	if !web.IsLoopback(host) {
		fmt.Fprintf(os.Stderr, "kbox: warning: kbox mcp listens on %s, not loopback: it runs programs for anyone with the token, over plain HTTP\n", listen)
	}
	fmt.Fprintf(os.Stderr, "kbox: mcp at http://%s/mcp\n", ln.Addr())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(fmt.Errorf("mcp: %w", err))
	}
	return 0
}

// bearer lets through requests with "Authorization: Bearer TOKEN".
func bearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kbox"`)
			http.Error(w, "kbox mcp: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
