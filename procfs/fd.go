package procfs

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"golang.org/x/sys/unix"
)

// The fds of a guest process in /proc/PID/fd and /proc/PID/fdinfo: its
// host fds (the host's /proc lists them) and its virtual fds (its
// fdtable). What a link reads as and where following it leads is the
// engine's to say (System.FdRef: it knows binds, shadows and LKL's
// files).

// fdPath resolves rest beneath base/fd of guest process tgid.
func fdPath(s System, tgid int, base, rest string, depth int) (Found, unix.Errno) {
	hbase := base[len("/proc/"):]
	if rest == "" {
		return node(base+"/fd", &Node{Kind: Dir, Like: hbase + "/fd",
			List: func() []fdtable.Dirent { return fdList(s, tgid, unix.DT_LNK) }})
	}
	num, rest2, _ := strings.Cut(rest, "/")
	if !isFdName(num) {
		return Found{}, unix.ENOENT
	}
	fd, err := strconv.Atoi(num)
	if err != nil {
		return Found{}, unix.ENOENT
	}
	ref, en := s.FdRef(tgid, fd)
	if en != 0 {
		return Found{}, en
	}
	if rest2 != "" {
		if ref.Path == "" || !ref.Dir {
			return Found{}, unix.ENOTDIR
		}
		return redirect(ref.Path, rest2, depth+1)
	}
	n := &Node{Kind: Link, Like: hbase + "/fd/" + num, Link: ref.Text, Fd: ref}
	if ref.Host == "" {
		n.Mode = linkMode(ref.Acc)
	}
	return node(base+"/fd/"+num, n)
}

// linkMode is the permission bits of an fd link, as Linux gives them:
// r-x for reading, -wx for writing.
func linkMode(acc int) uint32 {
	switch acc {
	case unix.O_WRONLY:
		return 0o300
	case unix.O_RDWR:
		return 0o700
	}
	return 0o500
}

// fdinfoPath resolves rest beneath base/fdinfo of guest process tgid.
func fdinfoPath(s System, tgid int, base, rest string) (Found, unix.Errno) {
	hbase := base[len("/proc/"):]
	if rest == "" {
		return node(base+"/fdinfo", &Node{Kind: Dir, Like: hbase + "/fdinfo",
			List: func() []fdtable.Dirent { return fdList(s, tgid, unix.DT_REG) }})
	}
	num, rest2, _ := strings.Cut(rest, "/")
	switch {
	case !isFdName(num):
		return Found{}, unix.ENOENT
	case rest2 != "":
		return Found{}, unix.ENOTDIR
	}
	fd, err := strconv.Atoi(num)
	if err != nil {
		return Found{}, unix.ENOENT
	}
	abs := base + "/fdinfo/" + num
	if fd < s.Config().VirtualFDs {
		if s.HostFdHidden(tgid, fd) {
			return Found{}, unix.ENOENT
		}
		if text, found := s.Fdinfo(tgid, fd); found {
			return node(abs, &Node{Kind: Text, Like: hbase + "/fdinfo", Text: text}) // an inotify fd's
		}
		return host(abs, abs[len("/proc/"):]) // the host's, of the guest's host fd
	}
	text, found := s.Fdinfo(tgid, fd)
	if !found {
		return Found{}, unix.ENOENT
	}
	return node(abs, &Node{Kind: Text, Like: hbase + "/fdinfo", Text: text})
}

// fdList makes the entries of /proc/PID/fd (dt DT_LNK) or fdinfo
// (DT_REG) of guest process tgid: its host fds (but those HostFdHidden
// says are not the guest's), then its virtual fds.
func fdList(s System, tgid int, dt uint8) []fdtable.Dirent {
	ents := dots()
	var fds []int
	virt := s.Config().VirtualFDs
	if names, err := os.ReadDir("/proc/" + strconv.Itoa(tgid) + "/fd"); err == nil {
		for _, n := range names {
			if fd, err := strconv.Atoi(n.Name()); err == nil && fd < virt && !s.HostFdHidden(tgid, fd) {
				fds = append(fds, fd)
			}
		}
	}
	slices.Sort(fds)
	fds = append(fds, s.VirtualFds(tgid)...)
	for _, fd := range fds {
		ents = append(ents, fdtable.Dirent{Ino: uint64(fd) + 0x100000, Type: dt, Name: strconv.Itoa(fd)})
	}
	return ents
}

// FdinfoFlags puts flags into an fdinfo text's "flags:" line (adding one
// if it has none).
func FdinfoFlags(b []byte, flags int) []byte {
	line := fmt.Sprintf("flags:\t0%o", flags)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "flags:") {
			lines[i] = line
			return []byte(strings.Join(lines, "\n"))
		}
	}
	return []byte(line + "\n" + string(b))
}
