package dispatch

import (
	"runtime"
	"sort"
	"testing"

	"github.com/kbox-project/kbox/seccomp"
)

// TestEverySyscallHasAnEntry: every syscall number of the running
// architecture (the kernel's names, from seccomp's tables) has an
// entry in the table, under its kernel name, and the table holds no other
// number: ENOSYS is always a decision, never an omission. make test-arm64
// runs it for aarch64.
func TestEverySyscallHasAnEntry(t *testing.T) {
	a := seccomp.NativeArch()
	if a == nil {
		t.Skip("unsupported arch")
	}
	names := a.Names()
	var missing []string
	for nr, name := range names {
		s := Lookup(nr)
		switch {
		case s.How == Unknown:
			missing = append(missing, name)
		case s.Name != name:
			t.Errorf("%s %d: entry named %q", name, nr, s.Name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s: %d syscalls have no entry: %v", a.Name, len(missing), missing)
	}
	Syscalls(func(nr int, s *Syscall) {
		if _, known := names[nr]; !known {
			t.Errorf("entry %d (%s) is no syscall of %s", nr, s.Name, a.Name)
		}
	})
}

// TestTableCoversEveryArch checks the neutral table against every
// architecture kbox runs on, in every build (not only the running arch's):
// each number of each architecture has the entry of its kernel name, each
// entry is a syscall of at least one architecture, and no name has two
// entries. The numbers are the arch tables' (numbers.go): an entry has a
// number exactly where its architecture has the syscall.
func TestTableCoversEveryArch(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range table {
		if seen[s.Name] {
			t.Errorf("%s: two entries", s.Name)
		}
		seen[s.Name] = true
	}
	somewhere := map[string]bool{}
	for _, a := range []*seccomp.Arch{seccomp.ArchX86_64, seccomp.ArchAArch64} {
		got, missing := numbered(a)
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: %d syscalls have no entry: %v", a.Name, len(missing), missing)
		}
		for nr, name := range a.Names() {
			somewhere[name] = true
			if nr < MaxNr && got[nr].Name != name {
				t.Errorf("%s %d (%s): entry %q", a.Name, nr, name, got[nr].Name)
			}
		}
		n := 0
		for nr := range got {
			if got[nr].How != Unknown {
				n++
			}
		}
		if n != len(a.Names()) {
			t.Errorf("%s: %d entries numbered for %d syscalls", a.Name, n, len(a.Names()))
		}
		if a == seccomp.NativeArch() {
			for nr := range got {
				if got[nr].Name != linux[nr].Name || got[nr].How != linux[nr].How {
					t.Errorf("%s %d: running table %q, numbered %q", a.Name, nr, linux[nr].Name, got[nr].Name)
				}
			}
		}
	}
	for _, s := range table {
		if !somewhere[s.Name] {
			t.Errorf("%s: no syscall of any architecture", s.Name)
		}
	}
}

// TestSyscallEntriesAreConsistent: each kind of entry (of every
// architecture) has what it needs and nothing that could never be used: a handler exactly where the
// syscall can reach kbox, an errno where kbox answers with one, a reason
// for every syscall kbox lets through or refuses.
func TestSyscallEntriesAreConsistent(t *testing.T) {
	for i := range table {
		s := &table[i]
		switch s.How {
		case Served, HostFD, NativeInNS:
			if s.Fn == nil {
				t.Errorf("%s (%s): no handler", s.Name, s.How)
			}
			if s.Errno != 0 {
				t.Errorf("%s (%s): an errno that is never used", s.Name, s.How)
			}
		case Native, Refused, Absent:
			if s.Fn != nil {
				t.Errorf("%s (%s): a handler that can never run", s.Name, s.How)
			}
			if s.Why == "" {
				t.Errorf("%s (%s): no reason", s.Name, s.How)
			}
			if (s.How == Native) != (s.Errno == 0) {
				t.Errorf("%s (%s): errno %v", s.Name, s.How, s.Errno)
			}
		default:
			t.Errorf("%s: How %d", s.Name, s.How)
		}
		if s.Facts&AddrArg4 != 0 && s.How != HostFD {
			t.Errorf("%s: AddrArg4 without HostFD", s.Name)
		}
		if s.Facts&(Pure|OwnChange) == Pure|OwnChange {
			t.Errorf("%s: both Pure and OwnChange", s.Name)
		}
		if s.Facts&FilterHostFD != 0 && s.How != Served {
			t.Errorf("%s: FilterHostFD without Served", s.Name)
		}
		if s.InProc > Inline {
			t.Errorf("%s: InProc %d", s.Name, s.InProc)
		}
		if s.FDs.FDArgs()&s.FDs.Dirfds() != 0 {
			t.Errorf("%s: FDs %b names an argument both an fd and a directory fd", s.Name, s.FDs)
		}
		if s.FDs&NewFD != 0 && s.How == HostFD {
			t.Errorf("%s: a new fd from a call that runs natively on host fds", s.Name)
		}
		if (s.InProc == FDGuard || s.InProc == GuestFDs) && s.FDs.FDArgs()&1 == 0 {
			t.Errorf("%s: %d without an fd in argument 0", s.Name, s.InProc)
		}
		if more := s.FDs.FDArgs() &^ 1; s.InProc == GuestFDs && more&(more-1) != 0 {
			t.Errorf("%s: GuestFDs with more than one fd past argument 0 (the filter checks one)", s.Name)
		}
	}
}

// TestServedSyscalls: the file syscalls the seccomp tier's coverage list
// names are served (not native, not absent).
func TestServedSyscalls(t *testing.T) {
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
		if !Handled(int(nr)) {
			t.Errorf("%s: no handler for %s (%d)", a.Name, n, nr)
		}
	}
}

// TestFDsColumn: the table says where the fds of the calls the in-process
// tiers' fd guard checks are (trap/cont.go takes its lists from it).
func TestFDsColumn(t *testing.T) {
	want := map[string]FDs{
		"read": FDArg0, "close": FDArg0, "dup3": FDArg0, "fchdir": FDArg0,
		"openat": NewFD | Dirfd0, "openat2": NewFD | Dirfd0, "open": NewFD, "socket": NewFD,
		"accept4": NewFD | FDArg0, "pidfd_getfd": NewFD | FDArg0, "memfd_secret": NewFD,
		"newfstatat": Dirfd0, "statx": Dirfd0, "execveat": Dirfd0, "symlinkat": Dirfd1,
		"getpid": 0, "pipe2": 0, "stat": 0, "mmap": 0, "close_range": 0,
		// Two fds, or an fd past argument 0.
		"epoll_ctl": FDArg0 | FDArg2, "sendfile": FDArg0 | FDArg1, "tee": FDArg0 | FDArg1,
		"splice": FDArg0 | FDArg2, "copy_file_range": FDArg0 | FDArg2,
		"linkat": Dirfd0 | Dirfd2, "renameat": Dirfd0 | Dirfd2, "renameat2": Dirfd0 | Dirfd2,
		"move_mount": Dirfd0 | Dirfd2, "fanotify_mark": FDArg0 | Dirfd3,
		// Once missing from the hand lists.
		"inotify_add_watch": FDArg0, "inotify_rm_watch": FDArg0, "sendmmsg": FDArg0,
		"recvmmsg": FDArg0, "epoll_pwait2": FDArg0, "pidfd_send_signal": FDArg0,
		"timerfd_gettime": FDArg0, "vmsplice": FDArg0, "cachestat": FDArg0,
		"open_tree": NewFD | Dirfd0, "fspick": NewFD | Dirfd0,
	}
	n := 0
	for i := range table {
		s := &table[i]
		if f, listed := want[s.Name]; listed {
			n++
			if s.FDs != f {
				t.Errorf("%s: FDs %b, want %b", s.Name, s.FDs, f)
			}
		}
	}
	if n != len(want) {
		t.Errorf("%d of the %d names are in the table", n, len(want))
	}
	// The masks trap/cont.go takes: bit i is argument i.
	for _, c := range []struct {
		f           FDs
		fds, dirfds uint8
	}{
		{FDArg0 | FDArg2, 0b101, 0}, {FDArg1 | NewFD, 0b010, 0},
		{Dirfd0 | Dirfd2, 0, 0b101}, {Dirfd1 | NewFD, 0, 0b010}, {FDArg0 | Dirfd3, 0b001, 0b1000},
	} {
		if c.f.FDArgs() != c.fds || c.f.Dirfds() != c.dirfds {
			t.Errorf("FDs %b: FDArgs %b, Dirfds %b; want %b, %b", c.f, c.f.FDArgs(), c.f.Dirfds(), c.fds, c.dirfds)
		}
	}
}
