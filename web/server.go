package web

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

//go:embed static
var staticFS embed.FS

// DefaultPort is the conventional observatory port (used by the CLI).
const DefaultPort = 8080

// Options configures NewServer.
type Options struct {
	// Addr is the bind address (default "127.0.0.1").
	Addr string
	// Port to listen on; 0 picks an ephemeral port (see Start's result).
	// The CLI default is DefaultPort.
	Port int
	// Token, if non-empty, is required on every endpoint as
	// "Authorization: Bearer TOKEN" or the "token" query parameter (a
	// valid query token also sets an HttpOnly, SameSite=Strict cookie so
	// that the dashboard's assets and EventSource load).
	Token string
	// Recorder is the event source (may be nil).
	Recorder *Recorder
	// Sampler provides snapshots and history (may be nil: a private
	// sampler without kernel telemetry is created).
	Sampler *Sampler
	// NetLog holds the network stack's decisions (--net; may be nil):
	// GET /api/net and the SSE "net" events.
	NetLog *NetLog
	// PollInterval is how often SSE handlers look for new events
	// (default 50ms).
	PollInterval time.Duration
	// WriteTimeout bounds each SSE write; a client that does not drain
	// its socket within it is disconnected (default 10s).
	WriteTimeout time.Duration
}

// Server is the observatory HTTP server.
type Server struct {
	opts    Options
	rec     *Recorder
	sampler *Sampler
	mux     *http.ServeMux

	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	wg   sync.WaitGroup // SSE handlers

	subscribers atomic.Int64
	sseLost     atomic.Uint64
	sseSent     atomic.Uint64
}

// NewServer builds a Server; it does not listen until Start.
func NewServer(opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1"
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	s := &Server{opts: opts, rec: opts.Recorder, sampler: opts.Sampler, done: make(chan struct{})}
	if s.sampler == nil {
		s.sampler = NewSampler(SamplerConfig{Recorder: opts.Recorder})
	}
	sub, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(sub))
	mux.HandleFunc("GET /api/snapshot", s.handleSnapshot)
	mux.HandleFunc("GET /api/history", s.handleHistory)
	mux.HandleFunc("GET /api/enosys", s.handleENOSYS)
	mux.HandleFunc("GET /api/syscalls", s.handleSyscalls)
	mux.HandleFunc("GET /api/events", s.handleEvents)
	mux.HandleFunc("GET /api/net", s.handleNet)
	mux.HandleFunc("POST /api/control", s.handleControl)
	mux.HandleFunc("GET /api/control", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use POST"})
	})
	mux.HandleFunc("GET /stats", s.handleStats)
	s.mux = mux
	return s
}

// Handler returns the HTTP handler (with authentication applied).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token != "" && !s.authorized(w, r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kbox"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// tokenCookie lets the browser load the dashboard's own assets after the
// page was opened with ?token=: a valid query token sets it.
const tokenCookie = "kbox_observatory_token"

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	want := []byte(s.opts.Token)
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return subtle.ConstantTimeCompare([]byte(strings.TrimPrefix(h, "Bearer ")), want) == 1
	}
	if q := r.URL.Query().Get("token"); q != "" {
		if subtle.ConstantTimeCompare([]byte(q), want) != 1 {
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return true
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		return subtle.ConstantTimeCompare([]byte(c.Value), want) == 1
	}
	return false
}

// Start listens and serves in the background, returning the actual
// listening address (host:port).
func (s *Server) Start() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return "", errors.New("observatory: already started")
	}
	select {
	case <-s.done:
		return "", errors.New("observatory: closed")
	default:
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.opts.Addr, strconv.Itoa(s.opts.Port)))
	if err != nil {
		return "", err
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return ln.Addr().String(), nil
}

// Close stops the server, ends all SSE streams and waits for their
// goroutines to exit.
func (s *Server) Close() error {
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	srv := s.srv
	s.mu.Unlock()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = srv.Shutdown(ctx)
		cancel()
		if err != nil {
			err = srv.Close()
		}
	}
	s.wg.Wait()
	return err
}

// IsLoopback reports whether addr ("host", "host:port", "[v6]:port")
// refers only to the loopback interface. "localhost" counts as loopback;
// an empty or unspecified host (0.0.0.0, ::) does not.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.sampler.Latest())
}

func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad limit"})
			return
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, s.sampler.History(limit))
}

// handleNet answers the network stack's decisions: counts and the last
// ?limit=N (default 100) kept.
func (s *Server) handleNet(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad limit"})
			return
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, s.opts.NetLog.Summary(limit))
}

func (s *Server) handleENOSYS(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.rec.ENOSYSCounts())
}

func (s *Server) handleSyscalls(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.rec.SyscallCounts())
}

// Stats is the /stats health summary.
type Stats struct {
	UptimeNs         int64  `json:"uptime_ns"`
	SyscallsTotal    uint64 `json:"syscalls_total"`
	EventsRecorded   uint64 `json:"events_recorded"`
	EventsSampledOut uint64 `json:"events_sampled_out"`
	EventsDropped    uint64 `json:"events_dropped"`
	SSESubscribers   int64  `json:"sse_subscribers"`
	SSEEventsSent    uint64 `json:"sse_events_sent"`
	SSEEventsLost    uint64 `json:"sse_events_lost"`
	Paused           bool   `json:"paused"`
}

// Stats returns the health summary served at /stats.
func (s *Server) Stats() Stats {
	return Stats{
		UptimeNs:         int64(s.rec.Uptime()),
		SyscallsTotal:    s.rec.Total(),
		EventsRecorded:   s.rec.Recorded(),
		EventsSampledOut: s.rec.SampledOut(),
		EventsDropped:    s.rec.Dropped(),
		SSESubscribers:   s.subscribers.Load(),
		SSEEventsSent:    s.sseSent.Load(),
		SSEEventsLost:    s.sseLost.Load(),
		Paused:           s.sampler.Paused(),
	}
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) handleControl(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Action string `json:"action"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad JSON"})
		return
	}
	switch req.Action {
	case "pause":
		s.sampler.Pause()
	case "resume":
		s.sampler.Resume()
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "action must be pause or resume"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"paused": s.sampler.Paused()})
}

const sseBatch = 256

// handleEvents streams ring events as Server-Sent Events. Each stream
// reads the ring from its own cursor; nothing is ever pushed to it, so a
// slow or stuck client only stalls its own goroutine.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	head := s.rec.Head()
	cursor := head // live only by default
	netCursor := s.opts.NetLog.Head()
	idStr := r.Header.Get("Last-Event-ID")
	if idStr == "" {
		idStr = q.Get("last_event_id")
	}
	if idStr != "" {
		if id, err := strconv.ParseUint(idStr, 10, 64); err == nil {
			cursor, netCursor = id, 0 // replay the kept net decisions
			if cursor > head {        // id from an earlier run: replay the ring
				cursor = 0
			}
		}
	} else if v := q.Get("backlog"); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			if n > head {
				n = head
			}
			cursor = head - n
			netCursor = 0
		}
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	s.wg.Add(1)
	defer s.wg.Done()
	s.subscribers.Add(1)
	defer s.subscribers.Add(-1)

	buf := make([]Event, sseBatch)
	out := make([]byte, 0, 64<<10)
	out = append(out, "retry: 1000\n\n"...)
	tick := time.NewTicker(s.opts.PollInterval)
	defer tick.Stop()
	lastWrite := time.Now()
	for {
		for {
			n, next, lost := s.rec.Read(cursor, buf)
			if lost > 0 {
				s.sseLost.Add(lost)
				out = append(out, "event: gap\ndata: {\"lost\":"...)
				out = strconv.AppendUint(out, lost, 10)
				resume := next + 1
				if n > 0 {
					resume = buf[0].Seq
				}
				out = append(out, ",\"resume_seq\":"...)
				out = strconv.AppendUint(out, resume, 10)
				out = append(out, "}\n\n"...)
			}
			for i := 0; i < n; i++ {
				e := &buf[i]
				out = append(out, "id: "...)
				out = strconv.AppendUint(out, e.Seq, 10)
				out = append(out, "\nevent: syscall\ndata: "...)
				out = AppendEventJSON(out, e)
				out = append(out, "\n\n"...)
			}
			cursor = next
			s.sseSent.Add(uint64(n))
			if len(out) >= 32<<10 || n < len(buf) {
				break
			}
		}
		if ds, _ := s.opts.NetLog.Since(netCursor); len(ds) > 0 {
			for i := range ds {
				out = append(out, "event: net\ndata: "...)
				out = AppendNetJSON(out, &ds[i])
				out = append(out, "\n\n"...)
			}
			netCursor = ds[len(ds)-1].Seq
		}
		if len(out) == 0 && time.Since(lastWrite) > 15*time.Second {
			out = append(out, ": keep-alive\n\n"...)
		}
		if len(out) > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
			if _, err := w.Write(out); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			out = out[:0]
			lastWrite = time.Now()
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-tick.C:
		}
	}
}
