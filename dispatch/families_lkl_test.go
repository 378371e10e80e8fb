//go:build lkl

package dispatch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/dispatch/dispatchtest"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

// The handlers of the file, stat and path families, called without a tier
// (dispatchtest.Guest) on a booted LKL with the test image, each case
// beside the same call made natively in a host directory with the same
// tree: the errno and what the call returned must be Linux's.

// engine is the engine of this test binary, on LKL booted by TestMain;
// nil when there is no image (KBOX_IMAGE).
var engine *dispatch.Engine

func TestMain(m *testing.M) {
	img := os.Getenv("KBOX_IMAGE")
	if img == "" {
		fmt.Println("kbox: *** SKIP dispatch's handler tests on LKL: KBOX_IMAGE not set ***")
		os.Exit(m.Run())
	}
	im, err := rootfs.OpenImage(img, "ext4", 0, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatch tests:", err)
		os.Exit(1)
	}
	r, err := rootfs.Setup(im, rootfs.Options{ReadOnly: true, Profile: rootfs.ProfileFull, Kernel: lkl.Config{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatch tests:", err)
		os.Exit(1)
	}
	engine = dispatch.New(dispatch.Options{HostRoutes: []string{"/proc", guestpath.CPURoute}, Dev: true})
	code := m.Run()
	engine.Shadows.Close()
	r.Close()
	os.Exit(code)
}

// cwd is AT_FDCWD as the kernel reads a dirfd argument (an int).
const cwd = uint64(unix.AT_FDCWD & 0xffffffff)

// world is one place where the cases run: through the engine in the
// guest's /tmp, or natively in a host directory.
type world struct {
	name string
	g    *dispatchtest.Guest
	call func(nr int, a [6]uint64) dispatchtest.Call
}

// tree makes the cases' files in w's current directory.
func tree(t *testing.T, w *world) {
	t.Helper()
	g := w.g
	must := func(what string, c dispatchtest.Call) dispatchtest.Call {
		if c.Errno != 0 {
			t.Fatalf("%s: making the tree: %s: %v", w.name, what, c.Errno)
		}
		return c
	}
	for _, d := range []string{"d", "e"} {
		must("mkdir "+d, w.call(unix.SYS_MKDIRAT, [6]uint64{cwd, g.Str(d), 0o755}))
	}
	for _, f := range []string{"f", "d/inner"} {
		c := must("create "+f, w.call(unix.SYS_OPENAT, [6]uint64{cwd, g.Str(f), unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC | unix.O_CLOEXEC, 0o644}))
		buf := g.Str("hello\n")
		must("write "+f, w.call(unix.SYS_WRITE, [6]uint64{uint64(c.Val), buf, 6}))
		must("close "+f, w.call(unix.SYS_CLOSE, [6]uint64{uint64(c.Val)}))
	}
	for _, l := range [][2]string{{"f", "l"}, {"nope", "dl"}, {"made", "dl2"}, {"loop", "loop"}} {
		must("symlink "+l[1], w.call(unix.SYS_SYMLINKAT, [6]uint64{g.Str(l[0]), cwd, g.Str(l[1])}))
	}
	// fchmodat: the umask would otherwise decide the modes.
	must("chmod f", w.call(unix.SYS_FCHMODAT, [6]uint64{cwd, g.Str("f"), 0o644}))
	g.Reset()
}

// famCase is one call: its arguments, and what to compare besides the
// value and errno (out: a summary of what the call wrote or left).
type famCase struct {
	name string
	nr   int
	args func(g *dispatchtest.Guest) [6]uint64
	// fd: the value is a new fd (compared as "an fd", then read whole
	// and closed).
	fd  bool
	out func(w *world, a [6]uint64, c dispatchtest.Call) string
}

func openat(name string, flags, mode uint64) func(g *dispatchtest.Guest) [6]uint64 {
	return func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str(name), flags | unix.O_CLOEXEC, mode}
	}
}

func at(nr int, name string, rest ...uint64) famCase {
	return famCase{nr: nr, args: func(g *dispatchtest.Guest) [6]uint64 {
		a := [6]uint64{cwd, g.Str(name)}
		copy(a[2:], rest)
		return a
	}}
}

func named(name string, c famCase) famCase { c.name = name; return c }

// statxOut summarizes a statx buffer: type and permissions, size, links.
func statxOut(w *world, a [6]uint64, c dispatchtest.Call) string {
	if c.Errno != 0 {
		return ""
	}
	b := w.g.Bytes(a[4], 256)
	mode := binary.LittleEndian.Uint16(b[28:])
	nlink := binary.LittleEndian.Uint32(b[16:])
	size := binary.LittleEndian.Uint64(b[40:])
	if mode&unix.S_IFMT == unix.S_IFDIR {
		size = 0 // directory sizes are the filesystem's
	}
	return fmt.Sprintf("mode=%o size=%d nlink=%d", mode, size, nlink)
}

func statx(name string, flags uint64) famCase {
	return famCase{nr: unix.SYS_STATX, out: statxOut, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str(name), flags, unix.STATX_BASIC_STATS, g.Buf(256)}
	}}
}

func readlinkat(name string, size uint64) famCase {
	return famCase{nr: unix.SYS_READLINKAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str(name), g.Buf(64), size}
	}, out: func(w *world, a [6]uint64, c dispatchtest.Call) string {
		if c.Errno != 0 {
			return ""
		}
		return string(w.g.Bytes(a[2], int(c.Val)))
	}}
}

// then is a statx of name after the call: what the call left.
func then(c famCase, name string) famCase {
	c.out = func(w *world, _ [6]uint64, _ dispatchtest.Call) string {
		s := statx(name, unix.AT_SYMLINK_NOFOLLOW)
		a := s.args(w.g)
		r := w.call(s.nr, a)
		if r.Errno != 0 {
			return name + ": " + r.Errno.Error()
		}
		return name + ": " + statxOut(w, a, r)
	}
	return c
}

var famCases = []famCase{
	// file
	{name: "open", nr: unix.SYS_OPENAT, args: openat("f", unix.O_RDONLY, 0), fd: true},
	{name: "open through link", nr: unix.SYS_OPENAT, args: openat("l", unix.O_RDONLY, 0), fd: true},
	{name: "open dir", nr: unix.SYS_OPENAT, args: openat("d", unix.O_RDONLY|unix.O_DIRECTORY, 0), fd: true},
	{name: "open missing", nr: unix.SYS_OPENAT, args: openat("nope", unix.O_RDONLY, 0)},
	{name: "open excl existing", nr: unix.SYS_OPENAT, args: openat("f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)},
	{name: "open under file", nr: unix.SYS_OPENAT, args: openat("f/x", unix.O_RDONLY, 0)},
	{name: "open file as dir", nr: unix.SYS_OPENAT, args: openat("f", unix.O_RDONLY|unix.O_DIRECTORY, 0)},
	{name: "open dir for write", nr: unix.SYS_OPENAT, args: openat("d", unix.O_WRONLY, 0)},
	{name: "open loop", nr: unix.SYS_OPENAT, args: openat("loop", unix.O_RDONLY, 0)},
	{name: "open nofollow link", nr: unix.SYS_OPENAT, args: openat("l", unix.O_RDONLY|unix.O_NOFOLLOW, 0)},
	{name: "open empty", nr: unix.SYS_OPENAT, args: openat("", unix.O_RDONLY, 0)},
	{name: "open too long", nr: unix.SYS_OPENAT, args: openat(strings.Repeat("n", 300), unix.O_RDONLY, 0)},
	{name: "open path too long", nr: unix.SYS_OPENAT, args: openat(strings.Repeat("d/", 2100), unix.O_RDONLY, 0)},
	{name: "open bad pointer", nr: unix.SYS_OPENAT, args: func(*dispatchtest.Guest) [6]uint64 { return [6]uint64{cwd, dispatchtest.Bad, unix.O_RDONLY} }},
	then(famCase{name: "create through dangling link", nr: unix.SYS_OPENAT, args: openat("dl2", unix.O_CREAT|unix.O_WRONLY, 0o600), fd: true}, "made"),
	then(famCase{name: "create excl through dangling link", nr: unix.SYS_OPENAT, args: openat("dl", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o600)}, "nope"),
	then(named("truncate on open", famCase{nr: unix.SYS_OPENAT, args: openat("made", unix.O_WRONLY|unix.O_TRUNC, 0), fd: true}), "made"),
	then(named("mkdir", at(unix.SYS_MKDIRAT, "new", 0o700)), "new"),
	named("mkdir existing", at(unix.SYS_MKDIRAT, "d", 0o700)),
	named("mkdir under missing", at(unix.SYS_MKDIRAT, "nope/x", 0o700)),
	named("mkdir over dangling link", at(unix.SYS_MKDIRAT, "dl", 0o700)),
	named("unlink dir", at(unix.SYS_UNLINKAT, "d", 0)),
	named("rmdir full", at(unix.SYS_UNLINKAT, "d", unix.AT_REMOVEDIR)),
	named("rmdir file", at(unix.SYS_UNLINKAT, "f", unix.AT_REMOVEDIR)),
	named("rmdir dot", at(unix.SYS_UNLINKAT, "e/.", unix.AT_REMOVEDIR)),
	named("unlink missing", at(unix.SYS_UNLINKAT, "nope", 0)),
	named("unlink bad flags", at(unix.SYS_UNLINKAT, "f", 0x4)),
	then(named("rmdir empty", at(unix.SYS_UNLINKAT, "e", unix.AT_REMOVEDIR)), "e"),
	{name: "rename noreplace", nr: unix.SYS_RENAMEAT2, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("made"), cwd, g.Str("f"), unix.RENAME_NOREPLACE}
	}},
	{name: "rename into own subdir", nr: unix.SYS_RENAMEAT2, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("new"), cwd, g.Str("new/sub"), 0}
	}},
	{name: "rename dir over file", nr: unix.SYS_RENAMEAT2, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("new"), cwd, g.Str("made"), 0}
	}},
	then(famCase{name: "rename", nr: unix.SYS_RENAMEAT2, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("made"), cwd, g.Str("moved"), 0}
	}}, "moved"),
	// stat
	named("statx", statx("f", 0)),
	named("statx link followed", statx("l", 0)),
	named("statx link", statx("l", unix.AT_SYMLINK_NOFOLLOW)),
	named("statx dir", statx("d", 0)),
	named("statx dangling", statx("dl", 0)),
	named("statx missing", statx("nope", 0)),
	named("statx empty path", statx("", unix.AT_EMPTY_PATH)),
	named("statx empty path without flag", statx("", 0)),
	named("statx under file", statx("f/x", 0)),
	named("statx bad flags", statx("f", 0x80000000)),
	{name: "fstatat bad flags", nr: unix.SYS_NEWFSTATAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("f"), g.Buf(256), 9999}
	}},
	{name: "fstatat bad flags, bad name", nr: unix.SYS_NEWFSTATAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, dispatchtest.Bad, g.Buf(256), 9999}
	}},
	{name: "statx bad buffer", nr: unix.SYS_STATX, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("f"), 0, unix.STATX_BASIC_STATS, dispatchtest.Bad}
	}},
	named("access read", at(unix.SYS_FACCESSAT, "f", unix.R_OK)),
	named("access exec of 0644", at(unix.SYS_FACCESSAT, "f", unix.X_OK)),
	named("access missing", at(unix.SYS_FACCESSAT, "nope", unix.F_OK)),
	named("access bad mode", at(unix.SYS_FACCESSAT, "f", 0x10)),
	named("access2 bad flags", at(unix.SYS_FACCESSAT2, "f", unix.R_OK, 0x1)),
	named("access2 nofollow dangling", at(unix.SYS_FACCESSAT2, "dl", unix.F_OK, unix.AT_SYMLINK_NOFOLLOW)),
	// path
	named("readlink", readlinkat("l", 64)),
	named("readlink short buffer", readlinkat("dl", 2)),
	named("readlink of file", readlinkat("f", 64)),
	named("readlink missing", readlinkat("nope", 64)),
	named("readlink zero size", readlinkat("l", 0)),
	{name: "symlink existing", nr: unix.SYS_SYMLINKAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{g.Str("x"), cwd, g.Str("l")}
	}},
	{name: "symlink empty target", nr: unix.SYS_SYMLINKAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{g.Str(""), cwd, g.Str("el")}
	}},
	then(famCase{name: "link", nr: unix.SYS_LINKAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("f"), cwd, g.Str("f2"), 0}
	}}, "f"),
	{name: "link existing", nr: unix.SYS_LINKAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("f"), cwd, g.Str("d/inner"), 0}
	}},
	{name: "link dir", nr: unix.SYS_LINKAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("d"), cwd, g.Str("dlink"), 0}
	}},
	then(famCase{name: "link follow", nr: unix.SYS_LINKAT, args: func(g *dispatchtest.Guest) [6]uint64 {
		return [6]uint64{cwd, g.Str("l"), cwd, g.Str("f3"), unix.AT_SYMLINK_FOLLOW}
	}}, "f3"),
	then(named("chmod", at(unix.SYS_FCHMODAT, "f", 0o600)), "f"),
	named("chmod missing", at(unix.SYS_FCHMODAT, "nope", 0o600)),
	{name: "chdir file", nr: unix.SYS_CHDIR, args: func(g *dispatchtest.Guest) [6]uint64 { return [6]uint64{g.Str("f")} }},
	{name: "chdir missing", nr: unix.SYS_CHDIR, args: func(g *dispatchtest.Guest) [6]uint64 { return [6]uint64{g.Str("nope")} }},
	{name: "getcwd too small", nr: unix.SYS_GETCWD, args: func(g *dispatchtest.Guest) [6]uint64 { return [6]uint64{g.Buf(2), 2} }},
}

// run makes the call in w and says what came of it.
func (c famCase) run(w *world) string {
	a := c.args(w.g)
	r := w.call(c.nr, a)
	got := fmt.Sprintf("val=%d", r.Val)
	switch {
	case r.Errno != 0:
		got = "errno=" + r.Errno.Error()
	case c.fd:
		got = "fd"
		fd := uint64(r.Val)
		sb := w.g.Buf(256)
		var st unix.Stat_t
		if s := w.call(unix.SYS_FSTAT, [6]uint64{fd, sb}); s.Errno != 0 {
			got += " (fstat: " + s.Errno.Error() + ")"
		} else if err := binary.Read(bytes.NewReader(w.g.Bytes(sb, 256)), binary.LittleEndian, &st); err != nil {
			got += " (" + err.Error() + ")"
		} else if st.Mode&unix.S_IFMT == unix.S_IFREG {
			b := w.g.Buf(64)
			n := w.call(unix.SYS_PREAD64, [6]uint64{fd, b, 64, 0})
			got += fmt.Sprintf(" reads %q", w.g.Bytes(b, max(int(n.Val), 0)))
		} else {
			got += fmt.Sprintf(" mode %o", st.Mode&unix.S_IFMT)
		}
		if c := w.call(unix.SYS_CLOSE, [6]uint64{fd}); c.Errno != 0 {
			got += " (close: " + c.Errno.Error() + ")"
		}
	}
	if c.out != nil {
		got += "; " + c.out(w, a, r)
	}
	w.g.Reset()
	return got
}

func TestFamiliesAgainstNative(t *testing.T) {
	if engine == nil {
		t.Skip("kbox: *** SKIP: no KBOX_IMAGE, so no LKL booted ***")
	}
	guest := newWorld(t, "kbox")
	p := engine.Start(unix.Getpid(), "/")
	guest.call = func(nr int, a [6]uint64) dispatchtest.Call {
		return guest.g.Dispatch(engine, &dispatch.Request{Nr: nr, Args: a, P: p})
	}
	dir := fmt.Sprintf("/tmp/families-%d", os.Getpid())
	if c := guest.call(unix.SYS_MKDIRAT, [6]uint64{cwd, guest.g.Str(dir), 0o755}); c.Errno != 0 {
		t.Fatalf("mkdir %s in the guest: %v", dir, c.Errno)
	}
	if c := guest.call(unix.SYS_CHDIR, [6]uint64{guest.g.Str(dir)}); c.Errno != 0 {
		t.Fatalf("chdir %s in the guest: %v", dir, c.Errno)
	}

	native := newWorld(t, "native")
	native.call = dispatchtest.Native
	old, _ := os.Getwd()
	if err := os.Chdir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(old) })
	oldMask := unix.Umask(0o022)
	t.Cleanup(func() { unix.Umask(oldMask) })

	tree(t, guest)
	tree(t, native)
	for _, c := range famCases {
		want := c.run(native)
		got := c.run(guest)
		if got != want {
			t.Errorf("%s: kbox %s, native %s", c.name, got, want)
		} else {
			t.Logf("%s: %s", c.name, got)
		}
	}
}

// lklGuest returns guest memory for a test of the booted engine, or
// skips the test when no LKL booted.
func lklGuest(t *testing.T) *dispatchtest.Guest {
	t.Helper()
	if engine == nil {
		t.Skip("kbox: *** SKIP: no KBOX_IMAGE, so no LKL booted ***")
	}
	// 256 KiB: a test may list /opt/tests and stat each of its
	// programs several times.
	g, err := dispatchtest.New(256 << 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

func newWorld(t *testing.T, name string) *world {
	g, err := dispatchtest.New(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return &world{name: name, g: g}
}
