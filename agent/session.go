package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kbox-project/kbox/sessiondir"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// ---- sessions

// SessionOpenIn is session_open's input.
type SessionOpenIn struct {
	Image  string `json:"image,omitempty" jsonschema:"the name of one of the server's images (its operator's --images directory; default: its --image); it is never changed"`
	Policy string `json:"policy,omitempty" jsonschema:"a policy for the session's runs, as TOML text (kbox image --policy, docs/agents.md): it adds restrictions to the operator's policy and removes none"`
	Net    *bool  `json:"net,omitempty" jsonschema:"false: no network for the session; true: the network the server's operator gives runs (an error if none); default: the operator's"`
	// Defaults of the session's runs, which a run's own override.
	Workdir string            `json:"workdir,omitempty" jsonschema:"the runs' default working directory (absolute; default: the image's, else /)"`
	Env     map[string]string `json:"env,omitempty" jsonschema:"environment variables the runs get over the image's (a run's env overrides them)"`
}

// SessionOpenOut is session_open's result.
type SessionOpenOut struct {
	Session string  `json:"session"`
	Image   string  `json:"image" jsonschema:"the image's name, or default"`
	Bytes   int64   `json:"bytes" jsonschema:"the image's size"`
	OpenMs  float64 `json:"open_ms"`
}

func (s *Server) sessionOpen(_ context.Context, _ *mcp.CallToolRequest, in SessionOpenIn) (*mcp.CallToolResult, SessionOpenOut, error) {
	var out SessionOpenOut
	img, err := s.imageOf(in.Image)
	if err != nil {
		return nil, out, err
	}
	s.mu.Lock()
	n, closed := len(s.sessions), s.closed
	s.mu.Unlock()
	if closed {
		return nil, out, toolError("the server is closing")
	}
	if n >= s.cfg.MaxSessions {
		return nil, out, toolError("%d sessions are open, the limit: close one first", n)
	}
	start := time.Now()
	f, err := os.Open(img)
	if err != nil {
		return nil, out, toolError("image: %v", err)
	}
	// A shared lock for the session's life: no kbox writes the image
	// meanwhile, any number of sessions and ephemeral runs share it.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, out, toolError("image %s is open read-write by a kbox: %v", img, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, out, err
	}
	dir, err := os.MkdirTemp(s.cfg.TmpDir, "kbox-session-")
	if err != nil {
		f.Close()
		return nil, out, err
	}
	se := &session{id: newID(), base: img, baseFile: f, dir: dir, size: fi.Size(), created: time.Now()}
	if in.Workdir != "" && !strings.HasPrefix(in.Workdir, "/") {
		f.Close()
		os.RemoveAll(dir)
		return nil, out, toolError("workdir %q must be an absolute path in the image", in.Workdir)
	}
	env, err := envList(in.Env)
	if err != nil {
		f.Close()
		os.RemoveAll(dir)
		return nil, out, err
	}
	se.policy, se.net, se.workdir, se.env = in.Policy, in.Net, in.Workdir, env
	if se.live, err = s.startLive(se, se.policy, se.net); err != nil {
		os.RemoveAll(dir)
		f.Close()
		return nil, out, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		se.live.close()
		os.RemoveAll(dir)
		f.Close()
		return nil, out, toolError("the server is closing")
	}
	s.sessions[se.id] = se
	s.mu.Unlock()
	name := in.Image
	if name == "" {
		name = "default"
	}
	out = SessionOpenOut{Session: se.id, Image: name, Bytes: se.size, OpenMs: float64(time.Since(start).Microseconds()) / 1000}
	return nil, out, nil
}

// SessionCloseIn is session_close's input.
type SessionCloseIn struct {
	Session  string `json:"session"`
	Snapshot string `json:"snapshot,omitempty" jsonschema:"save the session's image first as a snapshot of this name in the server's snapshot directory (its operator's --snapshots; a bare name, not an existing one's)"`
}

// SessionCloseOut is session_close's result.
type SessionCloseOut struct {
	Closed   bool   `json:"closed"`
	Snapshot string `json:"snapshot,omitempty" jsonschema:"the snapshot's name"`
}

func (s *Server) sessionClose(_ context.Context, _ *mcp.CallToolRequest, in SessionCloseIn) (*mcp.CallToolResult, SessionCloseOut, error) {
	var out SessionCloseOut
	var snap string
	if in.Snapshot != "" {
		// Refused before anything changes: the session stays open.
		var err error
		if snap, err = s.snapshotPath(in.Snapshot); err != nil {
			return nil, out, err
		}
	}
	se, err := s.lockSessionCold(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	// The kernel ends first: the overlay then holds all the session
	// wrote. A kernel that failed to write it back loses the session.
	// Without a snapshot, nothing of the overlay is kept: the kernel is
	// left to its exit.
	end := se.live.discard
	if snap != "" {
		end = se.live.close
	}
	lerr := end()
	if lerr != nil {
		snap = ""
	}
	if snap != "" {
		// Written whole under a hidden temporary name, then renamed:
		// the snapshot is whole or absent.
		tmp := filepath.Join(filepath.Dir(snap), "."+filepath.Base(snap)+".kbox-tmp-"+newID())
		err := se.saveImage(tmp)
		if err == nil {
			err = s.publish(tmp, snap)
		}
		if err != nil {
			os.Remove(tmp)
			// The session stays open, on a new kernel over its overlay.
			if se.live, lerr = s.startLive(se, se.policy, se.net); lerr != nil {
				s.endSession(se)
				return nil, out, toolError("snapshot: %v; the session could not go on and is closed: %v", err, lerr)
			}
			return nil, out, toolError("snapshot: %v", err)
		}
		out.Snapshot = in.Snapshot
	}
	s.endSession(se) // its kernel has ended: no error left to report
	if lerr != nil {
		msg := "the session is closed"
		if in.Snapshot != "" {
			msg += ", without its snapshot"
		}
		return nil, out, toolError("%s: %v", msg, lerr)
	}
	out.Closed = true
	return nil, out, nil
}

// sessionFileCall serves req through the session's live kernel. The
// caller holds se.mu.
func (s *Server) sessionFileCall(ctx context.Context, se *session, req fileRequest) (*fileAnswer, error) {
	if !strings.HasPrefix(req.Path, "/") {
		return nil, toolError("path %q must be absolute (a path in the image)", req.Path)
	}
	return se.live.file(ctx, req)
}

// saveImage writes the session's image to out, a new file: a sparse copy
// of the base with the overlay's written blocks over it. The session's
// kernels must all have stopped.
func (se *session) saveImage(out string) error {
	return sessiondir.SaveImage(se.baseFile, se.size, se.dir, out)
}
