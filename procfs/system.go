package procfs

import (
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// System is what the guest's /proc needs of the engine. The engine
// implements it; the package calls it only while it classifies a path
// under /proc or makes one of its texts.
type System interface {
	// Config is the engine's fixed facts.
	Config() Config

	// GuestTask reports whether host pid (a process or a thread) is one
	// of the guest's, as c sees it.
	GuestTask(c *Caller, pid int) bool
	// TgidOf returns the process id of guest task pid.
	TgidOf(c *Caller, pid int) int
	// Process returns the guest process tgid the engine knows, or nil;
	// with register, one that has made no notified syscall yet is
	// registered first.
	Process(tgid int, register bool) Process
	// InitCreds are the credentials of a guest process the engine does
	// not know yet (its first one's).
	InitCreds() Creds
	// ShownParent is the parent guest process tgid shows (stat, status,
	// getppid), and whether that hides its host parent (0 then).
	ShownParent(tgid int) (ppid int, hidden bool)
	// Keepers returns the host pids of kbox's keeper (the guest's
	// subreaper) and of its socket binder, 0 without them, and the guest
	// processes the engine knows.
	Keepers() (keeper, binder int)
	Known() []int

	// FdRef describes fd of guest process tgid.
	FdRef(tgid, fd int) (*FdRef, unix.Errno)
	// VirtualFds are tgid's virtual fds, in increasing order.
	VirtualFds(tgid int) []int
	// HostFdHidden reports that host fd of tgid is none of the guest's:
	// in the in-process tiers, a free number's placeholder or kbox's own.
	HostFdHidden(tgid, fd int) bool
	// Fdinfo returns the maker of /proc/PID/fdinfo/N of tgid's virtual
	// fd, or of its host fd when that is one kbox shows as its own (an
	// inotify fd).
	Fdinfo(tgid, fd int) (func() []byte, bool)

	// Shadow is the shadow whose content is host file (dev, ino), or
	// nil; Canonical is an image path with its links followed. They name
	// the files a guest maps (maps.go).
	Shadow(dev, ino uint64) *shadowfd.Node
	Canonical(p string) string

	// HostProc is kbox's O_PATH fd of the host's /proc (the route's
	// root), beneath which the host entries a node stands for are
	// reached.
	HostProc() (int, error)
	// BindPath is the guest path of host file path in a bind; OnRoute
	// reports a host path on a host route; FIFOPath is the image path of
	// the host FIFO (dev, ino) behind one of the image's; Inotify reports
	// that host socket inode ino is one of the guest's inotify fds;
	// PtsPath is the guest path of a file of kbox's devpts instance (dev
	// its device), which the host names by its path in the instance
	// ("/0"). They name a host fd's file (HostFdRef).
	BindPath(path string) (string, bool)
	PtsPath(dev uint64, name string) (string, bool)
	OnRoute(path string) bool
	FIFOPath(dev, ino uint64) (string, bool)
	Inotify(ino uint64) bool

	// Mounts are the mounts kbox itself serves (host routes, binds).
	Mounts() []KboxMount
	// Sysvipc resolves /proc/sysvipc (sub "") and its files; ENOENT
	// when the guest has no IPC namespace of its own.
	Sysvipc(abs, sub string) (*Node, unix.Errno)
	// IPCSysctl resolves /proc/sys/NAME when NAME is one of the IPC
	// namespace's files (kernel/shmmax, kernel/sem, fs/mqueue/msg_max,
	// ...) and the guest has a namespace of its own; nil otherwise
	// (LKL's /proc/sys answers).
	IPCSysctl(name string) *Node
}

// Config is the engine's fixed facts the guest's /proc depends on.
type Config struct {
	// VirtualFDs is the first virtual fd number.
	VirtualFDs int
	// KernelProc is kbox's fd of LKL's own proc, when HasKernelProc.
	KernelProc    int
	HasKernelProc bool
}

// Process is a guest process the engine knows.
type Process interface {
	Cwd() string
	CwdGone() bool // its working directory was removed
	Root() string  // the image path of its root directory ("/" unless chrooted)
	Exe() string   // "" when it has exec'd no program
	IDs() Creds
	// Ident returns what kbox keeps of the process's identity;
	// UpdateIdent changes it under the process's lock.
	Ident() Ident
	UpdateIdent(f func(*Ident) unix.Errno) unix.Errno
}

// Creds are the credentials of a guest process that /proc's rules read.
type Creds struct {
	UID, EUID, SUID, FSUID uint32
	GID, EGID, SGID, FSGID uint32
	Groups                 []uint32 // the supplementary groups (shared: never changed)
	Eff                    uint64   // effective capabilities (bit N is capability N)
	// Perm, Inh, Bnd and Amb are the permitted, inheritable, bounding
	// and ambient sets; NoNewPrivs the guest's own (status shows them).
	Perm, Inh, Bnd, Amb uint64
	NoNewPrivs          bool
}

// Has reports an effective capability.
func (c *Creds) Has(n int) bool { return c.Eff&(1<<n) != 0 }

// Memory is the memory of the calling guest process.
type Memory interface {
	Read(addr uint64, b []byte) error
	// ReadSome copies up to len(b) bytes, stopping early at unmapped
	// memory.
	ReadSome(addr uint64, b []byte) (int, error)
}

// Caller is the guest thread whose path is classified: its process
// (Self, whose credentials are read only when a rule needs them) and its
// memory.
type Caller struct {
	Tgid, Tid int
	Self      Process
	Mem       Memory
}

// KboxMount is a mount kbox serves: a host route (Root -1) or a bind
// (Root its host directory).
type KboxMount struct {
	Point    string // the guest path
	Root     int
	ReadOnly bool
}
