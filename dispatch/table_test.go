package dispatch

import (
	"runtime"
	"testing"

	"github.com/kbox-project/kbox/seccomp"
)

// TestTableCoversArch checks that the handler table, built from the
// native architecture's syscall numbers, serves the syscalls of the
// seccomp tier's coverage list; make test-arm64 runs it for aarch64.
func TestTableCoversArch(t *testing.T) {
	a := seccomp.NativeArch()
	if a == nil {
		t.Skip("unsupported arch")
	}
	names := []string{
		"openat", "openat2", "close", "close_range", "read", "write", "pread64", "pwrite64",
		"readv", "writev", "lseek", "sendfile", "copy_file_range", "fstat", "newfstatat", "statx",
		"statfs", "fstatfs", "faccessat", "faccessat2", "getdents64", "mkdirat", "unlinkat",
		"renameat", "renameat2", "linkat", "symlinkat", "readlinkat", "fchmod", "fchmodat",
		"fchown", "fchownat", "utimensat", "truncate", "ftruncate", "fallocate", "fsync",
		"fdatasync", "sync", "flock", "fcntl", "dup", "dup3", "ioctl", "chdir", "fchdir",
		"getcwd", "getuid", "setuid", "uname", "execve", "execveat", "mount",
		"umount2", "exit_group",
	}
	if runtime.GOARCH == "amd64" {
		names = append(names, "open", "creat", "stat", "lstat", "access", "mkdir", "rmdir",
			"unlink", "rename", "link", "symlink", "readlink", "chmod", "chown", "lchown", "dup2", "getdents")
	}
	for _, n := range names {
		nr, ok := a.Nr(n)
		if !ok {
			t.Errorf("%s has no syscall %s", a.Name, n)
			continue
		}
		if nr >= MaxNr || table[nr] == nil {
			t.Errorf("%s: no handler for %s (%d)", a.Name, n, nr)
		}
	}
}
