package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/kbox-project/kbox/sessiondir"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// ---- checkpoint, rollback, fork

// The session's disk is its image under a stack of layers (package
// sessiondir). A checkpoint seals the top layer, with the image's file
// system frozen, and names the chain of sealed layers:
// DIR/checkpoints/NAME of the session's directory. Nothing is copied.
// Rollback ends the session's kernel, makes the checkpoint's chain the
// session's under a new empty top and boots a new kernel on it; fork
// seals the source's top the same way and opens a new session whose
// directory links the source's sealed layers (hard links: a layer goes
// with the last directory that names it). The base image is never
// written. /tmp (the scratch disk) and processes are not part of a
// checkpoint or a fork.

// SessionCheckpointIn is session_checkpoint's input.
type SessionCheckpointIn struct {
	Session string `json:"session"`
	Name    string `json:"name" jsonschema:"the checkpoint's name: letters, digits and . _ + -, at most 64; a new name"`
}

// SessionCheckpointOut is its result.
type SessionCheckpointOut struct {
	Name string  `json:"name"`
	Ms   float64 `json:"ms" jsonschema:"how long the checkpoint took (the file system frozen, the top layer sealed)"`
}

func (s *Server) sessionCheckpoint(ctx context.Context, _ *mcp.CallToolRequest, in SessionCheckpointIn) (*mcp.CallToolResult, SessionCheckpointOut, error) {
	var out SessionCheckpointOut
	if err := sessiondir.CheckName(in.Name); err != nil {
		return nil, out, err
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	dir, err := sessiondir.NewCheckpoint(se.dir, in.Name)
	if errors.Is(err, os.ErrExist) {
		return nil, out, toolError("checkpoint %q exists", in.Name)
	}
	if err != nil {
		return nil, out, err
	}
	start := time.Now()
	if err := se.live.checkpoint(ctx, dir); err != nil {
		os.RemoveAll(dir)
		return nil, out, err
	}
	out.Name, out.Ms = in.Name, float64(time.Since(start).Microseconds())/1000
	return nil, out, nil
}

// checkpoint has the session's kernel seal its top layer and write the
// chain of sealed layers into dir, a new directory.
func (l *liveKernel) checkpoint(ctx context.Context, dir string) error {
	a, err := l.call(ctx, &serveRequest{Op: "checkpoint", Dir: dir}, nil, nil)
	if err != nil {
		return err
	}
	if a.Error != "" {
		return toolError("%s", a.Error)
	}
	return nil
}

// SessionRollbackIn is session_rollback's input.
type SessionRollbackIn struct {
	Session string `json:"session"`
	Name    string `json:"name" jsonschema:"a checkpoint of the session"`
}

// SessionRollbackOut is its result.
type SessionRollbackOut struct {
	Ms float64 `json:"ms" jsonschema:"from the call to the new kernel serving"`
}

func (s *Server) sessionRollback(ctx context.Context, _ *mcp.CallToolRequest, in SessionRollbackIn) (*mcp.CallToolResult, SessionRollbackOut, error) {
	var out SessionRollbackOut
	se, err := s.lockSessionCold(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	if !sessiondir.HasCheckpoint(se.dir, in.Name) {
		return nil, out, toolError("no checkpoint %q in session %s", in.Name, in.Session)
	}
	start := time.Now()
	// Every process of the session ends with its kernel; the kernel's
	// caches of the newer state go with it.
	lerr := se.live.discard()
	s.mu.Lock()
	se.procs = nil
	s.mu.Unlock()
	if err := sessiondir.Restore(se.dir, in.Name); err != nil {
		s.endSession(se)
		return nil, out, toolError("rollback: %v; the session is lost and closed", err)
	}
	if se.live, err = s.startLive(se, se.policy, se.net); err != nil {
		s.endSession(se)
		return nil, out, toolError("rollback: %v; the session is closed", err)
	}
	_ = lerr // the newer state is thrown away: how it ended does not matter
	out.Ms = float64(time.Since(start).Microseconds()) / 1000
	return nil, out, nil
}

// SessionForkIn is session_fork's input.
type SessionForkIn struct {
	Session string `json:"session"`
}

// SessionForkOut is its result.
type SessionForkOut struct {
	Session string  `json:"session" jsonschema:"the new session"`
	Ms      float64 `json:"ms" jsonschema:"the fork's time; the new session's kernel boots at its first call"`
	Note    string  `json:"note"`
}

func (s *Server) sessionFork(ctx context.Context, _ *mcp.CallToolRequest, in SessionForkIn) (*mcp.CallToolResult, SessionForkOut, error) {
	var out SessionForkOut
	src, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer src.release()
	start := time.Now()
	s.mu.Lock()
	n := len(s.sessions)
	s.mu.Unlock()
	if n >= s.cfg.MaxSessions {
		return nil, out, toolError("%d sessions are open, the limit: close one first", n)
	}
	parent, err := os.MkdirTemp(s.cfg.TmpDir, "kbox-session-")
	if err != nil {
		return nil, out, err
	}
	// The new session's directory gets the chain, then links to the
	// layers it names.
	dir := filepath.Join(parent, "s")
	if err := src.live.checkpoint(ctx, dir); err != nil {
		os.RemoveAll(parent)
		return nil, out, err
	}
	if err := sessiondir.LinkLayers(src.dir, dir); err != nil {
		os.RemoveAll(parent)
		return nil, out, err
	}
	f, err := os.Open(src.base)
	if err != nil {
		os.RemoveAll(parent)
		return nil, out, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		os.RemoveAll(parent)
		return nil, out, toolError("image %s: %v", src.base, err)
	}
	// Its kernel boots at its first call (lockSession).
	se := &session{id: newID(), base: src.base, baseFile: f, dir: dir, top: parent, size: src.size, created: time.Now(),
		policy: src.policy, net: src.net, workdir: src.workdir, env: src.env}
	se.lastUse.Store(time.Now().UnixNano())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.endSession(se)
		return nil, out, toolError("the server is closing")
	}
	s.sessions[se.id] = se
	s.mu.Unlock()
	out.Session, out.Ms = se.id, float64(time.Since(start).Microseconds())/1000
	out.Note = "the new session starts from the source's image as it is now; its processes and /tmp are not copied; its kernel boots at its first call"
	return nil, out, nil
}
