package dispatch

import (
	"bytes"
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// With --net the guest sees kbox's /etc/resolv.conf and /etc/hosts
// (docs/networking.md), made when opened and installed as a sealed
// read-only memfd like a text of kbox's /proc (procnode.go, openText): the
// image's copies are never changed, read-only images included.
//
//   - resolv.conf: "nameserver 10.0.2.3" (the DNS responder), then the
//     image's search, domain and options lines, if it has the file;
//   - hosts: localhost (IPv4 and IPv6) and the guest's current hostname
//     at 10.0.2.15, then the image's file, if any: resolvers take the first
//     match, so these names are kbox's and the image's other names stay.
//
// Writing them, renaming or removing them is refused (EACCES); a bind
// (-b) over /etc wins over them.

// netDNS is the DNS responder's address in the guest (usernet.DNSAddr).
const netDNS = "10.0.2.3"

// netGuestAddr is the guest's address (usernet.GuestAddr).
const netGuestAddr = "10.0.2.15"

// netFileTarget resolves /etc/resolv.conf and /etc/hosts to kbox's
// files, when NetFiles is on.
func (e *Engine) netFileTarget(abs string) (guestpath.Target, bool) {
	if !e.Opt.NetFiles {
		return guestpath.Target{}, false
	}
	var text func() []byte
	switch abs {
	case "/etc/resolv.conf":
		text = func() []byte { return ResolvConf(imageFile(abs)) }
	case "/etc/hosts":
		text = func() []byte { return HostsFile(guestHostname(), imageFile(abs)) }
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

// ResolvConf is the guest's resolv.conf: the responder, and the image's
// search, domain and options lines.
func ResolvConf(image []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# kbox --net: the DNS responder (docs/networking.md)\nnameserver " + netDNS + "\n")
	for _, line := range strings.Split(string(image), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "search" || f[0] == "domain" || f[0] == "options") {
			b.WriteString(strings.TrimSpace(line) + "\n")
		}
	}
	return b.Bytes()
}

// HostsFile is the guest's hosts: localhost, the hostname, then the
// image's file.
func HostsFile(hostname string, image []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# kbox --net (docs/networking.md)\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if hostname != "" && hostname != "(none)" && hostname != "localhost" {
		short, _, _ := strings.Cut(hostname, ".")
		if short != hostname {
			b.WriteString(netGuestAddr + "\t" + hostname + " " + short + "\n")
		} else {
			b.WriteString(netGuestAddr + "\t" + hostname + "\n")
		}
	}
	if len(image) > 0 {
		b.WriteString("# the image's /etc/hosts\n")
		b.Write(image)
		if image[len(image)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
