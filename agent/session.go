package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// ---- sessions

// SessionOpenIn is session_open's input.
type SessionOpenIn struct {
	Image string `json:"image,omitempty" jsonschema:"the name of one of the server's images (its operator's --images directory; default: its --image); it is never changed"`
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
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
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
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.mu.Unlock()
	if err := se.stopFiles(); err != nil {
		return nil, out, err
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
			return nil, out, toolError("snapshot: %v", err)
		}
		out.Snapshot = in.Snapshot
	}
	s.mu.Lock()
	delete(s.sessions, se.id)
	s.mu.Unlock()
	se.closed = true
	os.RemoveAll(se.dir)
	se.baseFile.Close()
	out.Closed = true
	return nil, out, nil
}

// ---- a session's file helper

// fileHelper is a `kbox file --serve` process on a session's image.
type fileHelper struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	dec    *json.Decoder
	stderr *bytes.Buffer
	done   chan error
}

// sessionFileCall serves req through the session's file helper, starting
// it if needed. The caller holds se.mu.
func (s *Server) sessionFileCall(ctx context.Context, se *session, req fileRequest) (*fileAnswer, error) {
	if !strings.HasPrefix(req.Path, "/") {
		return nil, toolError("path %q must be absolute (a path in the image)", req.Path)
	}
	if se.files == nil {
		h, err := s.startFiles(se)
		if err != nil {
			return nil, err
		}
		se.files = h
	}
	a, err := se.files.call(ctx, req)
	if err != nil {
		se.files.kill()
		se.files = nil
		return nil, err
	}
	return fileResult(req, a)
}

func (s *Server) startFiles(se *session) (*fileHelper, error) {
	args := []string{"file", "--serve", "--overlay", se.dir}
	if s.policy != nil {
		// The operator's path rules hold for the file tools too.
		args = append(args, "--policy", s.policyFile)
	}
	cmd := exec.Command(s.cfg.Kbox, append(args, se.base)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	h := &fileHelper{cmd: cmd, in: in, dec: json.NewDecoder(out), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		return nil, toolError("kbox file --serve: %v", err)
	}
	var ready struct{ Ready bool }
	if err := h.dec.Decode(&ready); err != nil || !ready.Ready {
		in.Close()
		cmd.Wait()
		return nil, toolError("kbox file --serve did not start: %s", lastLine(h.stderr.String()))
	}
	return h, nil
}

// call sends one request and waits for its answer, or for ctx.
func (h *fileHelper) call(ctx context.Context, req fileRequest) (*fileAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	res := make(chan error, 1)
	var a fileAnswer
	go func() {
		b, _ := json.Marshal(req)
		if _, err := h.in.Write(append(b, '\n')); err != nil {
			res <- err
			return
		}
		res <- h.dec.Decode(&a)
	}()
	select {
	case err := <-res:
		if err != nil {
			return nil, toolError("kbox file --serve: %v: %s", err, lastLine(h.stderr.String()))
		}
		return &a, nil
	case <-ctx.Done():
		return nil, toolError("kbox file --serve: %v", ctx.Err())
	}
}

func (h *fileHelper) kill() {
	h.cmd.Process.Kill()
	h.in.Close()
	h.cmd.Wait()
}

// stopFiles ends the session's file helper: stdin closes, it unmounts the
// image and exits. An unmount that failed is an error: writes may be lost.
func (se *session) stopFiles() error {
	h := se.files
	if h == nil {
		return nil
	}
	se.files = nil
	h.in.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return toolError("the session's file helper failed to unmount its image: %v: %s", err, lastLine(h.stderr.String()))
		}
		return nil
	case <-time.After(fileCallTimeout):
		h.cmd.Process.Kill()
		<-done
		return toolError("the session's file helper did not unmount its image in %v: killed", fileCallTimeout)
	}
}

// saveImage writes the session's image to out, a new file: a sparse copy
// of the base with the overlay's written blocks over it. The session's
// kernels must all have stopped.
func (se *session) saveImage(out string) error {
	if _, err := os.Stat(filepath.Join(se.dir, "busy")); err == nil {
		return errors.New("the session's image is incomplete: a kbox on it was killed")
	}
	var ranges [][2]int64
	bits, err := os.ReadFile(filepath.Join(se.dir, "dirty"))
	switch {
	case err == nil:
		if len(bits) != lkl.COWMapLen(se.size) {
			return fmt.Errorf("the session's block map has %d bytes, want %d", len(bits), lkl.COWMapLen(se.size))
		}
		ranges = lkl.DirtyRanges(bits, se.size)
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := SparseCopy(se.baseFile, out); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if len(ranges) > 0 {
		ov, err := os.Open(filepath.Join(se.dir, "overlay"))
		if err != nil {
			return err
		}
		defer ov.Close()
		if err := CopyRanges(ov, f, ranges); err != nil {
			return err
		}
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	return f.Sync()
}
