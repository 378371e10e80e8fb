package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// procSys is the engine as package procfs sees it (procfs.System): its
// processes, their fds, kbox's mounts. Only paths under /proc reach it.
type procSys Engine

var _ procfs.System = (*procSys)(nil)

// procCaller is the calling thread as package procfs sees it.
func (e *Engine) procCaller(r *Request) *procfs.Caller {
	return &procfs.Caller{Tgid: r.P.Tgid, Tid: r.G.Pid(), Self: r.P, Mem: r.G}
}

// procOf returns the process the engine knows by a thread or process id.
func (e *Engine) procOf(id int) *Proc { return (*e.procs.Load())[id] }

func (s *procSys) Config() procfs.Config {
	return procfs.Config{VirtualFDs: s.Opt.VirtualFDs, KernelProc: s.Opt.KernelProc, HasKernelProc: s.Opt.HasKernelProc}
}

// GuestTask: the caller, or a descendant of the keeper (which the keeper
// and kbox are not; see isGuest).
func (s *procSys) GuestTask(c *procfs.Caller, pid int) bool {
	e := (*Engine)(s)
	if pid == c.Tgid || pid == c.Tid {
		return true
	}
	if e.Keeper <= 0 && e.RootPid <= 0 {
		return e.procOf(pid) != nil // no supervisor (tests): what the engine knows
	}
	return e.isGuest(pid)
}

func (s *procSys) TgidOf(c *procfs.Caller, pid int) int { return (*Engine)(s).tgidOf(c.Tgid, pid) }

// tgidOf returns the process id of guest task pid, for a caller of
// process id self.
func (e *Engine) tgidOf(self, pid int) int {
	if pid == self {
		return pid
	}
	if p := e.procOf(pid); p != nil {
		return p.Tgid
	}
	if tgid, ok := statusField(pid, "Tgid"); ok {
		return tgid
	}
	return pid
}

func (s *procSys) Process(tgid int, register bool) procfs.Process {
	e := (*Engine)(s)
	p := e.procOf(tgid)
	if p == nil && register {
		p = e.Lookup(tgid)
	}
	if p == nil {
		return nil
	}
	return p
}

func (s *procSys) InitCreds() procfs.Creds { return s.initCred.ids() }

func (s *procSys) ShownParent(tgid int) (int, bool) { return (*Engine)(s).shownParent(tgid) }

func (s *procSys) Keepers() (int, int) { return s.Keeper, s.Binder }

func (s *procSys) Known() []int { return (*Engine)(s).Tgids(nil) }

func (s *procSys) FdRef(tgid, fd int) (*procfs.FdRef, unix.Errno) {
	return (*Engine)(s).fdRefOf(tgid, fd)
}

func (s *procSys) VirtualFds(tgid int) []int {
	p := (*Engine)(s).procOf(tgid)
	if p == nil {
		return nil
	}
	v, _ := p.FDs.Fds()
	return v
}

func (s *procSys) HostFdHidden(tgid, fd int) bool { return (*Engine)(s).hostFdHidden(tgid, fd) }

func (s *procSys) Fdinfo(tgid, fd int) (func() []byte, bool) {
	e := (*Engine)(s)
	p := e.procOf(tgid)
	if p == nil {
		return nil, false
	}
	ent, found := p.FDs.Get(fd)
	if !found {
		return nil, false
	}
	return func() []byte { return e.fdinfoText(ent) }, true
}

// MappedFile finds the guest's file behind a host file a guest maps: a
// shadow's content (by its host inode), a program's or script's sealed
// copy and a /proc text (by the memfd's name, which kbox gave it), a file
// of a bind (by its host path). The device and inode are LKL's for an
// image file.
func (s *procSys) MappedFile(dev, ino uint64, name string) (procfs.MappedFile, bool) {
	e := (*Engine)(s)
	var mf procfs.MappedFile
	bare, deleted := strings.CutSuffix(name, " (deleted)")
	if node := e.Shadows.Lookup(dev, ino); node != nil {
		mf.Path = e.lklFdPath(node.LKLFd(), node.Path())
		if st, err := lkl.Fstat(node.LKLFd()); err == nil {
			mf.Dev, mf.Ino, mf.Known = st.Dev, st.Ino, true
		}
		return mf, true
	}
	for _, prefix := range []string{"/memfd:kbox-exec:", "/memfd:kbox-script:", "/memfd:kbox:"} {
		if p, found := strings.CutPrefix(bare, prefix); found {
			mf.Path = e.canonical(p) // the exec'd path may be a link's
			if st, err := lkl.Stat(p, false); err == nil {
				mf.Dev, mf.Ino, mf.Known = st.Dev, st.Ino, true
			}
			return mf, true
		}
	}
	if g, inBind := e.bindGuestPath(bare); inBind && strings.HasPrefix(bare, "/") {
		mf.Path = g
		if deleted {
			mf.Path += " (deleted)"
		}
		return mf, true // a bind's file is the host's: its device and inode
	}
	return mf, false
}

// Mounts: the host routes (but guestpath.CPURoute, a directory of the guest's
// /sys, not a mount of its own), then the binds.
func (s *procSys) Mounts() []procfs.KboxMount {
	var out []procfs.KboxMount
	for _, rt := range s.Opt.HostRoutes {
		if rt != guestpath.CPURoute {
			out = append(out, procfs.KboxMount{Point: rt, Root: -1})
		}
	}
	for _, b := range s.Opt.Binds {
		out = append(out, procfs.KboxMount{Point: b.Guest, Root: b.Root, ReadOnly: b.ReadOnly})
	}
	return out
}

func (s *procSys) IPCSysctl(name string) *procfs.Node { return (*Engine)(s).ipcSysctl(name) }

func (s *procSys) Sysvipc(abs, sub string) (*procfs.Node, unix.Errno) {
	return (*Engine)(s).procSysvipc(abs, sub)
}
