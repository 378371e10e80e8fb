package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/netconf"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The file calls' glue for the guest's /etc/resolv.conf and /etc/hosts
// with --net (docs/networking.md): package netconf decides their texts
// (netconf.ResolvConf, netconf.HostsFile: the DNS responder, localhost and
// the guest's hostname, then the image's lines); here they become targets
// of path resolution (classifyRaw), made when opened and installed as a
// sealed read-only memfd like a text of kbox's /proc (procfs.TextFd,
// dispatch/procserve.go), with a stat of their own. The image's copies are never
// changed, read-only images included. Writing them, renaming or removing
// them is refused (EACCES); a bind (-b) over /etc wins over them.

// netFileTarget resolves /etc/resolv.conf and /etc/hosts to kbox's
// files, when NetFiles is on.
func (e *Engine) netFileTarget(abs string) (guestpath.Target, bool) {
	if !e.Opt.NetFiles {
		return guestpath.Target{}, false
	}
	var text func() []byte
	switch abs {
	case netconf.ResolvConfPath:
		text = func() []byte { return netconf.ResolvConf(imageFile(abs)) }
	case netconf.HostsPath:
		text = func() []byte { return netconf.HostsFile(guestHostname(), imageFile(abs)) }
	default:
		return guestpath.Target{}, false
	}
	n := &procfs.Node{Kind: procfs.Text, Text: text}
	n.Stat = func(st *unix.Stat_t) unix.Errno { return netFileStat(abs, len(text()), st) }
	return procTarget(abs, n), true
}

// imageFile is the image's copy of path (nil if none), read as root.
func imageFile(path string) []byte {
	var b []byte
	lkl.AsRoot(func() { b, _ = lkl.ReadFile(path) })
	return b
}

// guestHostname is the kernel's hostname (the guest's).
func guestHostname() string {
	u, err := lkl.Uname()
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Nodename[:])
}

// netFileStat is the stat of a kbox file: the image's file's (its owner,
// times, inode) if there is one, else its directory's, as a regular
// 0644 file of size bytes.
func netFileStat(path string, size int, st *unix.Stat_t) unix.Errno {
	var lst lkl.Stat64
	var err error
	lkl.AsRoot(func() {
		if lst, err = lkl.Stat(path, false); err != nil {
			lst, err = lkl.Stat(path[:strings.LastIndex(path, "/")], false)
		}
	})
	if err != nil {
		return sysabi.Errno(err)
	}
	lst.ToHost(st)
	st.Mode = unix.S_IFREG | 0o644
	st.Nlink = 1
	st.Size = int64(size)
	st.Blocks = (st.Size + 511) / 512
	return 0
}
