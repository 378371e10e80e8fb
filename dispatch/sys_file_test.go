package dispatch

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenArgs: open(2)'s flags and mode reduced as the kernel reduces
// them before opening, so that the host's strict openat2 (binds, host
// routes) takes what open would.
func TestOpenArgs(t *testing.T) {
	for _, c := range []struct {
		name        string
		flags, mode uint64
		wantF       int
		wantM       uint32
	}{
		{"plain create", unix.O_WRONLY | unix.O_CREAT, 0o644, unix.O_WRONLY | unix.O_CREAT, 0o644},
		{"mode with file type bits (busybox cp)", unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, unix.S_IFREG | 0o755, unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, 0o755},
		{"setuid and sticky bits kept", unix.O_CREAT, 0o7755, unix.O_CREAT, 0o7755},
		{"mode without O_CREAT dropped", unix.O_RDONLY, 0o644, unix.O_RDONLY, 0},
		{"mode with O_DIRECTORY alone dropped", unix.O_RDONLY | unix.O_DIRECTORY, 0o644, unix.O_DIRECTORY, 0},
		{"O_TMPFILE keeps its mode", unix.O_RDWR | unix.O_TMPFILE, 0o600, unix.O_RDWR | unix.O_TMPFILE, 0o600},
		{"unknown high bits dropped", unix.O_RDONLY | 0x40000000 | 1<<40, 0, unix.O_RDONLY, 0},
		{"O_PATH keeps only its flags", unix.O_PATH | unix.O_RDWR | unix.O_TRUNC | unix.O_NOFOLLOW | unix.O_CLOEXEC, 0, unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, 0},
		{"O_PATH with O_CREAT is plain O_PATH", unix.O_PATH | unix.O_CREAT, 0o644, unix.O_PATH, 0},
	} {
		f, m := openArgs(c.flags, c.mode)
		if f != c.wantF || m != c.wantM {
			t.Errorf("%s: openArgs(%#o, %#o) = %#o, %#o; want %#o, %#o", c.name, c.flags, c.mode, f, m, c.wantF, c.wantM)
		}
	}
}

// TestCheckOpenHow: openat2's own checks, which are strict where open's
// are lenient.
func TestCheckOpenHow(t *testing.T) {
	for _, c := range []struct {
		name string
		how  unix.OpenHow
		want unix.Errno
	}{
		{"create", unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY, Mode: 0o644}, 0},
		{"mode with file type bits", unix.OpenHow{Flags: unix.O_CREAT, Mode: unix.S_IFREG | 0o644}, unix.EINVAL},
		{"mode without O_CREAT", unix.OpenHow{Flags: unix.O_RDONLY, Mode: 0o644}, unix.EINVAL},
		{"mode with O_DIRECTORY alone", unix.OpenHow{Flags: unix.O_DIRECTORY, Mode: 0o644}, unix.EINVAL},
		{"O_TMPFILE with a mode", unix.OpenHow{Flags: unix.O_TMPFILE | unix.O_RDWR, Mode: 0o600}, 0},
		{"unknown flag", unix.OpenHow{Flags: 1 << 40}, unix.EINVAL},
		{"RESOLVE_CACHED alone", unix.OpenHow{Resolve: resolveCached}, unix.EAGAIN},
		{"RESOLVE_BENEATH", unix.OpenHow{Resolve: unix.RESOLVE_BENEATH}, unix.ENOSYS},
	} {
		if got := checkOpenHow(&c.how); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
