package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/kbox-project/kbox/agent"
	"github.com/kbox-project/kbox/audit"
	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/policy"
	"github.com/kbox-project/kbox/usernet"
	"github.com/kbox-project/kbox/web"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

const mcpUsage = `usage: kbox mcp [--image IMAGE] [--images DIR] [--policy FILE] [--net ...]
                [--snapshots DIR] [--audit FILE] [--listen ADDR:PORT [--token TOKEN]]

Serve agents' tool calls over the Model Context Protocol (docs/agents.md):
run, session_open, session_close, session_checkpoint, session_rollback,
session_fork, process_output, process_wait, process_signal, process_list,
read_file, write_file, list_dir, stat, snapshot, enosys and kernel_read.
On stdin/stdout by default. A session is one live kernel: what a run
leaves running or writes is there for the session's next call.

These options are the operator's: they bound every call. A call's
arguments are the agent's requests within them, never a host path.

  --image IMAGE        the image for calls that name none
  --images DIR         calls may name an image of DIR by bare name: "alpine"
                       is DIR/alpine.ext4, else DIR/alpine (give --image,
                       --images or both)
  --policy FILE        a policy (TOML, docs/agents.md) for every run, and its
                       path rules for the session file tools; an agent's
                       run policy only adds restrictions to it
  --net                runs get a network (as kbox image --net); an agent may
                       turn it off for a run (net: false), never on
  --net-allow CIDR[:PORT], --net-allow-host NAME[:PORT], --net-deny-all,
  --dns SERVER[:PORT]  the network's egress rules, as kbox image's
  --snapshots DIR      session_close saves a snapshot an agent names (a bare
                       name) as DIR/NAME.ext4; without it, snapshots are
                       refused. An agent can run a snapshot only when DIR is
                       also --images
  --snapshots-overwrite
                       a snapshot may replace one of the same name
  --audit FILE         every run appends to this hash-chained audit log; each
                       record carries the SHA-256 of these settings
  --listen ADDR:PORT   streamable HTTP at http://ADDR:PORT/mcp instead of
                       stdio; every request needs "Authorization: Bearer
                       TOKEN"
  --token TOKEN        the bearer token (default $KBOX_MCP_TOKEN, else a
                       random one printed on stderr)
  --tmp-dir DIR        where sessions' images live (default $TMPDIR)
  --max-sessions N     at most N sessions open at once (default 16); more
                       are refused
  --session-idle D     close a session no call used for D (default 30m; 0:
                       never)
  --warm-pool N        keep N kernels booted per image for one-shot runs
                       (default 1; 0: none); each costs a kbox process
                       (docs/agents.md)
  -h, --help           this help
`

// mcpGCPercent is kbox mcp's GOGC.
const mcpGCPercent = 400

func runMCP(args []string) int {
	// The SDK allocates a fresh decode buffer (tens of KB) for each message
	// it reads, on a live heap of a few MB: at Go's default the collector
	// ran every few calls and took about 40% of the server's CPU. Four
	// times the live heap between collections (docs/agents.md), unless
	// GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(mcpGCPercent)
	}
	cfg := agent.Config{WarmPool: 1}
	var listen, token, policyFile string
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
		case "--net", "--net-deny-all", "--snapshots-overwrite":
			if hasVal {
				fmt.Fprintf(os.Stderr, "kbox: %s takes no value\n%s", name, mcpUsage)
				return exitUsage
			}
			switch name {
			case "--net":
				cfg.Net.Enabled = true
			case "--net-deny-all":
				cfg.Net.DenyAll = true
			default:
				cfg.SnapshotsOverwrite = true
			}
		case "--image", "--images", "--snapshots", "--policy", "--net-allow", "--net-allow-host", "--dns",
			"--audit", "--listen", "--token", "--tmp-dir", "--max-sessions", "--session-idle", "--warm-pool":
			if !needVal() || val == "" {
				fmt.Fprintf(os.Stderr, "kbox: %s needs a value\n%s", name, mcpUsage)
				return exitUsage
			}
			var err error
			switch name {
			case "--image":
				cfg.Image = val
			case "--images":
				cfg.Images = val
			case "--snapshots":
				cfg.Snapshots = val
			case "--policy":
				policyFile = val
			case "--net-allow":
				_, err = usernet.ParseRule(val)
				cfg.Net.Allow = append(cfg.Net.Allow, val)
			case "--net-allow-host":
				_, err = usernet.ParseHostRule(val)
				cfg.Net.AllowHosts = append(cfg.Net.AllowHosts, val)
			case "--dns":
				cfg.Net.DNS = val
			case "--audit":
				cfg.Audit = val
			case "--listen":
				listen = val
			case "--token":
				token = val
			case "--tmp-dir":
				cfg.TmpDir = val
			case "--max-sessions":
				n, perr := strconv.Atoi(val)
				if perr != nil || n < 1 || n > 4096 {
					err = errors.New("want a number of sessions from 1 to 4096")
				}
				cfg.MaxSessions = n
			case "--warm-pool":
				n, perr := strconv.Atoi(val)
				if perr != nil || n < 0 || n > 64 {
					err = errors.New("want a number of kernels from 0 to 64")
				}
				cfg.WarmPool = n
			case "--session-idle":
				d, perr := time.ParseDuration(val)
				if perr != nil || d < 0 {
					err = errors.New("want a duration such as 30m, or 0 for never")
				}
				cfg.SessionIdle = d
				if d == 0 {
					cfg.SessionIdle = -1
				}
			}
			if err != nil {
				return fail(usagef("%s: %v", name, err))
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
	if err := checkMCPConfig(&cfg, policyFile); err != nil {
		return fail(err)
	}
	s, err := agent.New(cfg)
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	if cfg.Audit != "" {
		if err := auditMCPStart(s, cfg.Audit); err != nil {
			return fail(err)
		}
	}
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

// checkMCPConfig checks the operator's settings and reads the policy file
// into cfg.
func checkMCPConfig(cfg *agent.Config, policyFile string) error {
	if cfg.Image == "" && cfg.Images == "" {
		return usagef("give --image IMAGE or --images DIR: the images runs may use")
	}
	if cfg.Image != "" {
		if fi, err := os.Stat(cfg.Image); err != nil || !fi.Mode().IsRegular() {
			return usagef("--image %s: not an image file", cfg.Image)
		}
	}
	for _, d := range []struct{ flag, dir string }{{"--images", cfg.Images}, {"--snapshots", cfg.Snapshots}} {
		if d.dir == "" {
			continue
		}
		if fi, err := os.Stat(d.dir); err != nil || !fi.IsDir() {
			return usagef("%s %s: not a directory", d.flag, d.dir)
		}
	}
	if cfg.SnapshotsOverwrite && cfg.Snapshots == "" {
		return usagef("--snapshots-overwrite needs --snapshots")
	}
	n := cfg.Net
	if !n.Enabled && (len(n.Allow) > 0 || len(n.AllowHosts) > 0 || n.DenyAll || n.DNS != "") {
		return usagef("--net-allow, --net-allow-host, --net-deny-all and --dns need --net")
	}
	if policyFile != "" {
		// The bytes checked are the bytes every run gets (the server
		// keeps a copy): editing the file later changes nothing.
		b, err := os.ReadFile(policyFile)
		if err != nil {
			return usagef("--policy: %v", err)
		}
		p, err := policy.Parse(b)
		if err != nil {
			return usagef("--policy: policy %s: %v", policyFile, err)
		}
		if _, err := checkPolicy(policyFile, p); err != nil {
			return usagef("--policy: %v", err)
		}
		cfg.Policy = b
	}
	cfg.CheckPolicy = func(p *policy.Policy) error {
		_, err := dispatch.CompilePolicy(p)
		return err
	}
	return nil
}

// auditMCPStart appends the server's mcp_start record: its settings, whose
// hash every record of its runs carries.
func auditMCPStart(s *agent.Server, file string) error {
	var id [8]byte
	rand.Read(id[:])
	l, err := audit.Open(file, hex.EncodeToString(id[:]))
	if err != nil {
		return err
	}
	l.SetSettings(s.SettingsSHA256())
	var settings map[string]any
	b, _ := json.Marshal(s.Settings())
	json.Unmarshal(b, &settings)
	if _, err := l.Append("mcp_start", map[string]any{"settings": settings, "kbox_version": version}); err != nil {
		l.Close()
		return err
	}
	return l.Close()
}
