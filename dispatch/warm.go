package dispatch

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/elfload"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Libraries warmed at exec. A dynamic program's loader opens the
// libraries the program names (DT_NEEDED) a few hundred microseconds
// after the exec, and the first open of each makes its shadow: libc's
// 1.9 MB took 2.5 ms of /bin/true's run, through LKL. At the exec kbox
// starts making those shadows on a goroutine (shadowfd.Manager.Warm),
// for the libraries found in the directories the loader searches by
// default; the loader's open then finds the shadow, or waits for it. A
// library looked up elsewhere (RUNPATH, LD_LIBRARY_PATH, ld.so.cache) is
// made by its own open, as before; a shadow made for nothing costs its
// file's size in the shadow store until it is trimmed.

// maxWarm bounds the libraries warmed per exec.
const maxWarm = 8

// libDirs are the loader's default directories, multiarch first
// (glibc's Debian layout, then musl's and the rest).
func libDirs() []string {
	triplet := "x86_64-linux-gnu"
	if runtime.GOARCH == "arm64" {
		triplet = "aarch64-linux-gnu"
	}
	return []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib64", "/lib", "/usr/lib64", "/usr/lib"}
}

// warmLibraries starts making the shadows of prog's libraries, for a
// process outside any chroot (inside one the libraries are beneath it);
// r is nil for the first program (ReadProgram: the in-process tiers).
func (e *Engine) warmLibraries(r *Request, prog *image) {
	// A program not read (run before, loadImage) had its libraries
	// warmed then.
	if e.Shadows == nil || prog.info.Kind != elfload.Dynamic || !prog.c.read() {
		return
	}
	if r != nil && (r.P == nil || r.P.chroot() != "") {
		return
	}
	// One warm-up at a time: execs in a burst (a shell loop, make -j)
	// take no more than one more thread, and the first warms what the
	// rest need.
	if !e.warming.CompareAndSwap(false, true) {
		return
	}
	// The names are read on the goroutine, from a dup of the memfd
	// (the exec releases its bytes), off the exec's path.
	fd, err := dupCloexec(prog.c.fd)
	if err != nil {
		e.warming.Store(false)
		return
	}
	go func() {
		f := os.NewFile(uintptr(fd), "kbox-exec")
		libs := neededLibs(f)
		f.Close()
		e.warm(libs)
	}()
}

// Prewarm starts, before the guest's first exec, the reads that exec
// will make: the program at clean guest path p and its loader, read
// through LKL, then its libraries' shadows (warm). The seccomp tier's
// guest takes milliseconds to reach its exec (its process's start, the
// notification), which a cold kernel's reads then overlap. The exec then
// takes the program's and the loader's memfds as read here (takePrewarmed)
// where their files are unchanged. A bind's program (a host file) and one
// on a host route are left alone; nothing is checked or reported here:
// the exec does that, the permission checks included.
func (e *Engine) Prewarm(p string) {
	p = guestpath.Clean("/", p)
	if e.Shadows == nil || e.bindOf(p) != nil {
		return
	}
	if _, onRoute := e.route(p); onRoute {
		return
	}
	if !e.warming.CompareAndSwap(false, true) {
		return
	}
	pw := &prewarm{path: p, done: make(chan struct{})}
	if old := e.prewarmed.Swap(pw); old != nil {
		old.release() // an earlier Prewarm no exec took
	}
	go func() {
		var c content
		var k execKey
		asRoot(func() { c, k, _ = e.loadImageFile(p, false) })
		info, err := elfload.Inspect(c.b, machine())
		libs := neededLibs(bytes.NewReader(c.b))
		pw.keep(p, c, k)
		if err == nil && info.Kind == elfload.Dynamic {
			ldp := guestpath.Clean("/", info.Interp)
			asRoot(func() { c, k, _ = e.loadImageFile(ldp, false) })
			pw.keep(ldp, c, k)
			close(pw.done)
			e.warm(libs) // ends the warm-up
			return
		}
		close(pw.done)
		e.warming.Store(false)
	}()
}

// prewarm holds what Prewarm read for the guest's first exec: the
// program and its loader, each with the key (execKey) it had when read.
type prewarm struct {
	path  string        // the program's clean guest path
	done  chan struct{} // closed once files is complete
	mu    sync.Mutex
	files []prewarmed
}

type prewarmed struct {
	path string
	key  execKey
	c    content
}

// keep adds a file Prewarm read, if its key can stand for its bytes
// (settled: the exec cache's rule); else it is released.
func (pw *prewarm) keep(p string, c content, k execKey) {
	if !c.read() || !settled(k) {
		c.release()
		return
	}
	pw.files = append(pw.files, prewarmed{path: p, key: k, c: c})
}

// takePrewarmed hands the exec the memfd Prewarm read of image file p, if
// the file's key is still k: the same file, unchanged since. For the
// program Prewarm reads it waits for its reads to end, which is sooner
// than reading it again; for another file it does not wait.
func (e *Engine) takePrewarmed(p string, k execKey) (content, bool) {
	pw := e.prewarmed.Load()
	if pw == nil {
		return content{fd: -1}, false
	}
	if p == pw.path {
		<-pw.done
	} else {
		select {
		case <-pw.done:
		default:
			return content{fd: -1}, false
		}
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	for i, f := range pw.files {
		if f.path == p && f.key == k {
			pw.files = append(pw.files[:i], pw.files[i+1:]...)
			return f.c, true
		}
	}
	return content{fd: -1}, false
}

// dropPrewarmed releases what the first exec did not take (after it, or
// at the engine's close).
func (e *Engine) dropPrewarmed() {
	if e.prewarmed.Load() == nil {
		return
	}
	if pw := e.prewarmed.Swap(nil); pw != nil {
		pw.release()
	}
}

// release closes pw's memfds once its reads are done.
func (pw *prewarm) release() {
	go func() {
		<-pw.done
		pw.mu.Lock()
		defer pw.mu.Unlock()
		for i := range pw.files {
			pw.files[i].c.release()
		}
		pw.files = nil
	}()
}

// neededLibs returns the DT_NEEDED names of the ELF r, nil if it has
// none or cannot be read. r is the guest's file: whatever debug/elf makes
// of a hostile one, kbox goes on (the guest's loader reports the file).
func neededLibs(r io.ReaderAt) (libs []string) {
	defer func() {
		if recover() != nil {
			libs = nil
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return nil
	}
	libs, _ = f.ImportedLibraries()
	return libs
}

func (e *Engine) warm(libs []string) {
	defer e.warming.Store(false)
	// lkl.AsRoot's credentials are the calling thread's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dirs := libDirs()
	for i, lib := range libs {
		if i == maxWarm {
			break
		}
		if lib == "" || strings.Contains(lib, "/") {
			continue
		}
		for _, d := range dirs {
			if p := d + "/" + lib; e.bindOf(p) == nil && e.warmOne(p) {
				break
			}
		}
	}
}

// warmOne makes the shadow of the regular file at image path p, as root;
// it reports whether p is such a file.
func (e *Engine) warmOne(p string) bool {
	var found bool
	lkl.AsRoot(func() {
		lfd, err := lkl.Open(p, int(lkl.OpenFlagsToLKL(unix.O_RDONLY|unix.O_CLOEXEC)), 0)
		if err != nil {
			return
		}
		st, err := lkl.Fstat(lfd)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !e.Shadows.Fits(st.Size) || generated(lfd, &st) {
			lkl.Close(lfd)
			return
		}
		found = true
		e.Shadows.Warm(lfd, &st, p)
	})
	return found
}
