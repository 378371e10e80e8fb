package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ---- files

// fileRequest and fileAnswer are kbox file's (cmd/kbox/file.go).
type fileRequest struct {
	Op     string  `json:"op"`
	Path   string  `json:"path"`
	Offset int64   `json:"offset,omitempty"`
	Limit  int64   `json:"limit,omitempty"`
	Data   string  `json:"data,omitempty"`
	Mode   *uint32 `json:"mode,omitempty"`
	Mkdirs bool    `json:"mkdirs,omitempty"`
}

// FileStat is one file's metadata.
type FileStat struct {
	Path    string `json:"path"`
	Type    string `json:"type" jsonschema:"file, dir, symlink, fifo, socket, char, block"`
	Mode    string `json:"mode" jsonschema:"permission bits, octal"`
	Size    int64  `json:"size"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	Nlink   uint32 `json:"nlink"`
	MtimeNs int64  `json:"mtime_ns"`
	Ino     uint64 `json:"ino"`
}

type fileAnswer struct {
	Error   string     `json:"error"`
	Errno   string     `json:"errno"`
	Data    string     `json:"data"` // base64, from kbox file
	Raw     []byte     `json:"-"`    // the bytes: Data's, or a session's raw part
	Size    int64      `json:"size"`
	EOF     bool       `json:"eof"`
	Written int64      `json:"written"`
	Stat    *FileStat  `json:"stat"`
	Entries []FileStat `json:"entries"`
	Cut     bool       `json:"cut"`
}

// fileCall runs kbox file on image.
func (s *Server) fileCall(ctx context.Context, image string, req fileRequest) (*fileAnswer, error) {
	if !strings.HasPrefix(req.Path, "/") {
		return nil, toolError("path %q must be absolute (a path in the image)", req.Path)
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cfg.Kbox, "file", image)
	cmd.Stdin = bytes.NewReader(body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, toolError("kbox file: %v: %s", err, lastLine(stderr.String()))
	}
	var a fileAnswer
	if err := json.Unmarshal(stdout.Bytes(), &a); err != nil {
		return nil, toolError("kbox file: bad answer: %v", err)
	}
	raw, err := base64.StdEncoding.DecodeString(a.Data)
	if err != nil {
		return nil, toolError("kbox file: bad answer: %v", err)
	}
	a.Raw = raw
	return fileResult(req, &a)
}

// fileResult turns an answer's error into the tool's.
func fileResult(req fileRequest, a *fileAnswer) (*fileAnswer, error) {
	if a.Error != "" {
		msg := fmt.Sprintf("%s %s: %s", req.Op, req.Path, a.Error)
		if a.Errno != "" {
			msg += " (" + a.Errno + ")"
		}
		return nil, errors.New(msg)
	}
	return a, nil
}

// ReadFileIn is read_file's input.
type ReadFileIn struct {
	Session string `json:"session"`
	Path    string `json:"path" jsonschema:"absolute path in the session's image"`
	Offset  int64  `json:"offset,omitempty"`
	Limit   int64  `json:"limit,omitempty" jsonschema:"at most this many bytes (default and maximum 16 MiB)"`
}

// ReadFileOut is read_file's result. The bytes come once: text that is
// valid UTF-8 is the result's content (what a model is shown), and
// other bytes are content_base64 here. A 16 MiB read is not doubled.
type ReadFileOut struct {
	Path          string `json:"path"`
	Encoding      string `json:"encoding" jsonschema:"text: the bytes are the result's text content; base64: they are content_base64"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the bytes, base64, when they are not valid UTF-8"`
	Bytes         int    `json:"bytes" jsonschema:"bytes returned"`
	Size          int64  `json:"size" jsonschema:"the file's size"`
	EOF           bool   `json:"eof"`
}

func (s *Server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadFileIn) (*mcp.CallToolResult, ReadFileOut, error) {
	var out ReadFileOut
	if in.Offset < 0 || in.Limit < 0 {
		return nil, out, toolError("offset and limit must not be negative")
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "read", Path: in.Path, Offset: in.Offset, Limit: in.Limit})
	if err != nil {
		return nil, out, err
	}
	data := a.Raw
	out = ReadFileOut{Path: in.Path, Encoding: "text", Bytes: len(data), Size: a.Size, EOF: a.EOF}
	text := string(data)
	if !utf8.Valid(data) {
		out.Encoding, out.ContentBase64 = "base64", base64.StdEncoding.EncodeToString(data)
		text = fmt.Sprintf("%s: %d bytes, not UTF-8 (content_base64 has them)", in.Path, len(data))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// WriteFileIn is write_file's input.
type WriteFileIn struct {
	Session       string `json:"session"`
	Path          string `json:"path" jsonschema:"absolute path in the session's image"`
	Content       string `json:"content,omitempty" jsonschema:"the new content as text (give content or content_base64)"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the new content, base64"`
	Mode          string `json:"mode,omitempty" jsonschema:"permission bits in octal, e.g. 0755 (default 0644)"`
	Mkdirs        bool   `json:"mkdirs,omitempty" jsonschema:"create missing parent directories"`
}

// WriteFileOut is write_file's result.
type WriteFileOut struct {
	Path    string `json:"path"`
	Written int64  `json:"written"`
}

func (s *Server) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteFileIn) (*mcp.CallToolResult, WriteFileOut, error) {
	var out WriteFileOut
	data := in.ContentBase64
	switch {
	case in.Content != "" && in.ContentBase64 != "":
		return nil, out, toolError("give content or content_base64, not both")
	case in.ContentBase64 != "":
		if _, err := base64.StdEncoding.DecodeString(in.ContentBase64); err != nil {
			return nil, out, toolError("content_base64 is not base64: %v", err)
		}
	default:
		data = base64.StdEncoding.EncodeToString([]byte(in.Content))
	}
	var mode *uint32
	if in.Mode != "" {
		m, err := strconv.ParseUint(in.Mode, 8, 32)
		if err != nil || m > 0o7777 {
			return nil, out, toolError("mode %q: want octal permission bits such as 0644", in.Mode)
		}
		mode = new(uint32(m))
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "write", Path: in.Path, Data: data, Mode: mode, Mkdirs: in.Mkdirs})
	if err != nil {
		return nil, out, err
	}
	return nil, WriteFileOut{Path: in.Path, Written: a.Written}, nil
}

// ListDirIn is list_dir's input.
type ListDirIn struct {
	Session string `json:"session"`
	Path    string `json:"path" jsonschema:"absolute path of a directory in the session's image"`
	Limit   int64  `json:"limit,omitempty" jsonschema:"at most this many entries (default and maximum 10000)"`
}

// ListDirOut is list_dir's result.
type ListDirOut struct {
	Path    string     `json:"path"`
	Entries []FileStat `json:"entries"`
	Cut     bool       `json:"cut" jsonschema:"more entries than the limit"`
}

func (s *Server) listDir(ctx context.Context, _ *mcp.CallToolRequest, in ListDirIn) (*mcp.CallToolResult, ListDirOut, error) {
	var out ListDirOut
	if in.Limit < 0 {
		return nil, out, toolError("limit must not be negative")
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "list", Path: in.Path, Limit: in.Limit})
	if err != nil {
		return nil, out, err
	}
	out = ListDirOut{Path: in.Path, Entries: a.Entries, Cut: a.Cut}
	if out.Entries == nil {
		out.Entries = []FileStat{}
	}
	return nil, out, nil
}

// StatIn is stat's input.
type StatIn struct {
	Session string `json:"session"`
	Path    string `json:"path" jsonschema:"absolute path in the session's image"`
}

func (s *Server) stat(ctx context.Context, _ *mcp.CallToolRequest, in StatIn) (*mcp.CallToolResult, FileStat, error) {
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, FileStat{}, err
	}
	defer se.release()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "stat", Path: in.Path})
	if err != nil {
		return nil, FileStat{}, err
	}
	if a.Stat == nil {
		return nil, FileStat{}, toolError("kbox file: no stat in its answer")
	}
	return nil, *a.Stat, nil
}

// KernelReadIn is kernel_read's input.
type KernelReadIn struct {
	Path    string `json:"path" jsonschema:"a file of the kernel's /proc or /sys, e.g. /proc/meminfo, /proc/vmstat, /proc/slabinfo, /sys/block/vda/size"`
	Session string `json:"session,omitempty" jsonschema:"boot the kernel on this session's image (default: the server's image)"`
	Image   string `json:"image,omitempty" jsonschema:"boot the kernel on this one of the server's images (by name, as run's image)"`
}

// KernelReadOut is kernel_read's result.
type KernelReadOut struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

func (s *Server) kernelRead(ctx context.Context, _ *mcp.CallToolRequest, in KernelReadIn) (*mcp.CallToolResult, KernelReadOut, error) {
	var out KernelReadOut
	var img string
	if in.Session != "" {
		se, err := s.lockSession(in.Session)
		if err != nil {
			return nil, out, err
		}
		defer se.release()
		a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "kernel_read", Path: in.Path})
		if err != nil {
			return nil, out, err
		}
		return nil, KernelReadOut{Path: in.Path, Text: string(a.Raw)}, nil
	} else {
		var err error
		if img, err = s.imageOf(in.Image); err != nil {
			return nil, out, err
		}
	}
	a, err := s.fileCall(ctx, img, fileRequest{Op: "kernel_read", Path: in.Path})
	if err != nil {
		return nil, out, err
	}
	return nil, KernelReadOut{Path: in.Path, Text: string(a.Raw)}, nil
}

// ---- the last run's observations

// LastRunIn is snapshot's and enosys's input.
type LastRunIn struct {
	Session string `json:"session,omitempty" jsonschema:"the session whose last run to report (default: the server's last run)"`
}

// SnapshotOut is snapshot's result.
type SnapshotOut struct {
	Argv      []string       `json:"argv"`
	EndedAt   string         `json:"ended_at"`
	Telemetry *Telemetry     `json:"telemetry"`
	Kernel    map[string]any `json:"kernel,omitempty" jsonschema:"the observatory's kernel snapshot (GET /api/snapshot, field kernel) as the run ended"`
}

// ENOSYSOut is enosys's result.
type ENOSYSOut struct {
	Argv   []string          `json:"argv"`
	ENOSYS map[string]uint64 `json:"enosys" jsonschema:"syscall name -> times answered ENOSYS"`
}

func (s *Server) lastRun(sid string) (*lastRun, error) {
	if sid != "" {
		if _, err := s.session(sid); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lr := s.last
	if sid != "" {
		lr = s.sessions[sid].last
	}
	if lr == nil {
		return nil, toolError("no run yet")
	}
	return lr, nil
}

func (s *Server) snapshot(_ context.Context, _ *mcp.CallToolRequest, in LastRunIn) (*mcp.CallToolResult, SnapshotOut, error) {
	lr, err := s.lastRun(in.Session)
	if err != nil {
		return nil, SnapshotOut{}, err
	}
	out := SnapshotOut{Argv: lr.argv, EndedAt: lr.at.UTC().Format(time.RFC3339Nano), Telemetry: lr.telemetry}
	if len(lr.kernel) > 0 {
		json.Unmarshal(lr.kernel, &out.Kernel)
	}
	return nil, out, nil
}

func (s *Server) enosys(_ context.Context, _ *mcp.CallToolRequest, in LastRunIn) (*mcp.CallToolResult, ENOSYSOut, error) {
	lr, err := s.lastRun(in.Session)
	if err != nil {
		return nil, ENOSYSOut{}, err
	}
	out := ENOSYSOut{Argv: lr.argv, ENOSYS: map[string]uint64{}}
	if lr.telemetry != nil && lr.telemetry.ENOSYS != nil {
		out.ENOSYS = lr.telemetry.ENOSYS
	}
	return nil, out, nil
}
