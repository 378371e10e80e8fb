package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

// `kbox file IMAGE`: one file operation on an image through LKL, with no
// guest process. kbox mcp runs it for a session's read_file, write_file,
// list_dir, stat and kernel_read (docs/agents.md): LKL boots once per
// process, so each call is a short kbox process of its own. The request
// is one JSON object on stdin, the answer one on stdout.

const fileUsage = `usage: kbox file [--policy FILE]... IMAGE < REQUEST.json
       kbox file --serve [--overlay DIR] [--policy FILE]... IMAGE

One file operation on IMAGE through the in-process kernel, with no guest
process: the request is a JSON object on stdin, the answer a JSON object on
stdout. Ops: read {path, offset, limit}, write {path, data (base64), mode,
mkdirs}, list {path, limit}, stat {path}, kernel_read {path: /proc/NAME
or /sys/NAME}.
With --serve the kernel stays up: IMAGE is opened read-write, a line
{"ready":true} is printed, then each request line gets one answer line,
until stdin ends; then the image is unmounted. With --overlay, IMAGE is
only read and writes go to the kept copy-on-write layer in DIR (as kbox
image --overlay). With --policy (repeatable, as kbox image's), the
policy's path rules apply: a hidden path is ENOENT and left out of
listings, writing a read-only one EROFS. kbox mcp uses it; see
docs/agents.md.
`

// FileRequest is kbox file's request.
type FileRequest struct {
	Op     string  `json:"op"`
	Path   string  `json:"path"`
	Offset int64   `json:"offset,omitempty"`
	Limit  int64   `json:"limit,omitempty"`
	Data   string  `json:"data,omitempty"` // base64
	Mode   *uint32 `json:"mode,omitempty"` // default 0644
	Mkdirs bool    `json:"mkdirs,omitempty"`
}

// FileStat is a file's metadata.
type FileStat struct {
	Path    string `json:"path"`
	Type    string `json:"type"`
	Mode    string `json:"mode"`
	Size    int64  `json:"size"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	Nlink   uint32 `json:"nlink"`
	MtimeNs int64  `json:"mtime_ns"`
	Ino     uint64 `json:"ino"`
}

// FileAnswer is kbox file's answer. Error is set for what the file
// operation itself failed with (ENOENT, EISDIR...), Errno its name.
type FileAnswer struct {
	Error   string     `json:"error,omitempty"`
	Errno   string     `json:"errno,omitempty"`
	Data    string     `json:"data,omitempty"` // base64 (kbox file's stdout)
	Raw     []byte     `json:"-"`              // the bytes: a session socket's raw part, else Data
	Size    int64      `json:"size,omitempty"` // the whole file's
	EOF     bool       `json:"eof,omitempty"`
	Written int64      `json:"written,omitempty"`
	Stat    *FileStat  `json:"stat,omitempty"`
	Entries []FileStat `json:"entries,omitempty"`
	Cut     bool       `json:"cut,omitempty"` // more entries than the limit
}

// Limits of kbox file.
const (
	fileReadMax  = 16 << 20
	fileWriteMax = 64 << 20
	fileListMax  = 10000
)

// fileArgs are kbox file's options.
type fileArgs struct {
	serve   bool
	overlay string
	policy  *dispatch.Policy
	image   string
}

func parseFileArgs(args []string) (*fileArgs, error) {
	var a fileArgs
	for i := 0; i < len(args); i++ {
		switch v := args[i]; {
		case v == "--serve":
			a.serve = true
		case (v == "--overlay" || v == "--policy") && i+1 < len(args):
			i++
			if v == "--overlay" {
				a.overlay = args[i]
				break
			}
			c, _, err := addPolicy(a.policy, args[i])
			if err != nil {
				return nil, usagef("--policy: %v", err)
			}
			a.policy = c
		case strings.HasPrefix(v, "-") || a.image != "" || i != len(args)-1:
			return nil, usagef("bad kbox file arguments %q\n%s", args, fileUsage)
		default:
			a.image = v
		}
	}
	if a.image == "" || a.overlay != "" && !a.serve {
		return nil, usagef("bad kbox file arguments %q\n%s", args, fileUsage)
	}
	return &a, nil
}

func runFile(args []string) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Print(fileUsage)
		return 0
	}
	fa, err := parseFileArgs(args)
	if err != nil {
		return fail(err)
	}
	if fa.serve {
		return serveFiles(fa)
	}
	var req FileRequest
	dec := json.NewDecoder(io.LimitReader(os.Stdin, fileWriteMax*2))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fail(usagef("file request: %v", err))
	}
	if err := req.check(); err != nil {
		return fail(err)
	}
	if !lkl.Available {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", lkl.ErrNotBuilt)
		return exitUsage
	}
	ro := req.Op != "write"
	img, err := rootfs.OpenImage(fa.image, "ext4", 0, ro)
	if err != nil {
		return fail(err)
	}
	root, err := rootfs.Setup(img, rootfs.Options{ReadOnly: ro})
	if err != nil {
		img.Close()
		return fail(err)
	}
	fp := newFilePolicy(fa.policy, root)
	ans := req.serve(root, fp)
	if err := root.Close(); err != nil {
		// A write not on the image is kbox's failure, not the file's.
		return fail(fmt.Errorf("unmounting %s: %w", fa.image, err))
	}
	b, _ := json.Marshal(ans.asJSON())
	os.Stdout.Write(append(b, '\n'))
	return 0
}

// asJSON puts the bytes read (Raw) into Data, base64, for kbox file's
// JSON answer.
func (a *FileAnswer) asJSON() *FileAnswer {
	if a.Raw != nil {
		a.Data = base64.StdEncoding.EncodeToString(a.Raw)
	}
	return a
}

// serveFiles is kbox file --serve: one boot, any number of requests.
func serveFiles(fa *fileArgs) (status int) {
	image, overlay := fa.image, fa.overlay
	if !lkl.Available {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", lkl.ErrNotBuilt)
		return exitUsage
	}
	var opt rootfs.Options
	if overlay != "" {
		k, err := openKeptOverlay(overlay, image)
		if err != nil {
			return fail(err)
		}
		defer k.release()
		// Saved once the kernel has halted, however serving ends.
		defer func() {
			if err := k.save(); err != nil {
				status = fail(fmt.Errorf("overlay %s: saving its map: %w", overlay, err))
			}
		}()
		opt.Overlay = k.layer()
	}
	img, err := rootfs.OpenImage(image, "ext4", 0, overlay != "")
	if err != nil {
		return fail(err)
	}
	root, err := rootfs.Setup(img, opt)
	if err != nil {
		img.Close()
		return fail(err)
	}
	fp := newFilePolicy(fa.policy, root)
	out := json.NewEncoder(os.Stdout)
	out.Encode(map[string]bool{"ready": true})
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	for {
		var req FileRequest
		err := dec.Decode(&req)
		if err == io.EOF {
			break
		}
		if err != nil {
			// The stream cannot be resynchronized: answer and end.
			out.Encode(&FileAnswer{Error: "bad request: " + err.Error()})
			break
		}
		if err := req.check(); err != nil {
			out.Encode(&FileAnswer{Error: err.Error()})
			continue
		}
		out.Encode(req.serve(root, fp).asJSON())
	}
	if err := root.Close(); err != nil {
		return fail(fmt.Errorf("unmounting %s: %w", image, err))
	}
	return 0
}

func (r *FileRequest) check() error {
	switch r.Op {
	case "read", "write", "list", "stat", "kernel_read":
	default:
		return usagef("bad op %q: want read, write, list, stat or kernel_read", r.Op)
	}
	if !strings.HasPrefix(r.Path, "/") {
		return usagef("path %q must be absolute", r.Path)
	}
	if r.Offset < 0 || r.Limit < 0 {
		return usagef("negative offset or limit")
	}
	if r.Op == "kernel_read" {
		if _, _, err := kernelFileName(r.Path); err != nil {
			return err
		}
	}
	return nil
}

// kernelFileName checks a kernel_read path: a file of the kernel's own
// /proc, none of its process directories, or of its /sys. It returns
// the name under /proc or /sys, and whether it is a /sys file.
func kernelFileName(p string) (string, bool, error) {
	c := path.Clean(p)
	if name, ok := strings.CutPrefix(c, "/sys/"); ok && name != "" && c == p {
		return name, true, nil
	}
	name, ok := strings.CutPrefix(c, "/proc/")
	if !ok || name == "" || c != p {
		return "", false, usagef("kernel_read path %q: want a clean /proc/NAME or /sys/NAME (e.g. /proc/meminfo)", p)
	}
	first, _, _ := strings.Cut(name, "/")
	if first == "self" || first == "thread-self" || strings.Trim(first, "0123456789") == "" {
		return "", false, usagef("kernel_read path %q: the kernel's own state only, no process directories", p)
	}
	return name, false, nil
}

func answerErr(err error) *FileAnswer {
	a := &FileAnswer{Error: err.Error()}
	var en unix.Errno
	if errors.As(err, &en) {
		a.Errno = unix.ErrnoName(en)
	}
	return a
}

func (r *FileRequest) serve(root *rootfs.Root, fp *filePolicy) *FileAnswer {
	if r.Op != "kernel_read" {
		// The path checked is the path used: ".." is taken lexically.
		r.Path = path.Clean(r.Path)
		if err := fp.check(r); err != nil {
			return answerErr(err)
		}
	}
	switch r.Op {
	case "read":
		return readImageFile(r.Path, r.Offset, r.Limit)
	case "write":
		return r.write()
	case "list":
		return listImageDir(r.Path, r.Limit, fp)
	case "stat":
		st, err := statImage(r.Path)
		if err != nil {
			return answerErr(err)
		}
		return &FileAnswer{Stat: st}
	case "kernel_read":
		name, sys, _ := kernelFileName(r.Path)
		read := root.ReadKernelProc
		if sys {
			read = root.ReadKernelSys
		}
		b, err := read(name)
		if err != nil {
			return answerErr(err)
		}
		if len(b) > fileReadMax {
			b = b[:fileReadMax]
		}
		return &FileAnswer{Raw: b, Size: int64(len(b)), EOF: true}
	}
	return &FileAnswer{Error: "bad op"}
}

func readImageFile(p string, off, limit int64) *FileAnswer {
	if limit == 0 || limit > fileReadMax {
		limit = fileReadMax
	}
	fd, err := lkl.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return answerErr(err)
	}
	defer lkl.Close(fd)
	st, err := lkl.Fstat(fd)
	if err != nil {
		return answerErr(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return answerErr(unix.EISDIR)
	}
	if off > 0 {
		if _, e := lkl.Syscall6(lkl.SysLseek, uintptr(fd), uintptr(off), unix.SEEK_SET, 0, 0, 0); e != 0 {
			return answerErr(e)
		}
	}
	// Read straight into out, sized for the rest of the file and one
	// byte more (a read that returns nothing there is the end); it grows
	// if the file does.
	out := make([]byte, 0, min(limit, max(st.Size-off, 0)+1))
	eof := false
	for int64(len(out)) < limit {
		if len(out) == cap(out) {
			out = slices.Grow(out, int(min(limit-int64(len(out)), 64<<10)))
		}
		room := out[len(out):min(int64(cap(out)), limit)]
		n, err := lkl.Read(fd, room)
		if err != nil {
			return answerErr(err)
		}
		if n == 0 {
			eof = true
			break
		}
		out = out[:len(out)+n]
	}
	if !eof && off+int64(len(out)) >= st.Size && st.Mode&unix.S_IFMT == unix.S_IFREG {
		eof = true
	}
	return &FileAnswer{Raw: out, Size: st.Size, EOF: eof}
}

func (r *FileRequest) write() *FileAnswer {
	data, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return &FileAnswer{Error: "data is not base64: " + err.Error()}
	}
	if len(data) > fileWriteMax {
		return answerErr(unix.EFBIG)
	}
	mode := uint32(0o644)
	if r.Mode != nil {
		mode = *r.Mode & 0o7777
	}
	if r.Mkdirs {
		dir := "/"
		for _, c := range strings.Split(strings.Trim(path.Dir(path.Clean(r.Path)), "/"), "/") {
			if c == "" {
				continue
			}
			dir = path.Join(dir, c)
			if err := lkl.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return answerErr(err)
			}
		}
	}
	if err := lkl.WriteFile(r.Path, data, mode); err != nil {
		return answerErr(err)
	}
	lkl.Sync()
	return &FileAnswer{Written: int64(len(data))}
}

func statImage(p string) (*FileStat, error) {
	st, err := lkl.Stat(p, true)
	if err != nil {
		return nil, err
	}
	return &FileStat{Path: p, Type: fileType(st.Mode), Mode: fmt.Sprintf("%04o", st.Mode&0o7777), Size: st.Size,
		UID: st.Uid, GID: st.Gid, Nlink: st.Nlink, MtimeNs: st.Mtime*1e9 + int64(st.MtimeNsec), Ino: st.Ino}, nil
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "char"
	case unix.S_IFBLK:
		return "block"
	}
	return "unknown"
}

func listImageDir(p string, limit int64, fp *filePolicy) *FileAnswer {
	if limit == 0 || limit > fileListMax {
		limit = fileListMax
	}
	names, err := lkl.ReadDir(p)
	if err != nil {
		return answerErr(err)
	}
	a := &FileAnswer{Entries: []FileStat{}}
	for _, n := range names {
		if fp.hidden(path.Join(p, n)) {
			continue
		}
		if int64(len(a.Entries)) == limit {
			a.Cut = true
			break
		}
		st, err := statImage(path.Join(p, n))
		if err != nil {
			a.Entries = append(a.Entries, FileStat{Path: path.Join(p, n), Type: "unknown"})
			continue
		}
		a.Entries = append(a.Entries, *st)
	}
	return a
}
