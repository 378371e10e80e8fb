package procfs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostdev"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The guest's mount table (/proc/PID/mounts, mountinfo, mountstats):
// LKL's mounts as the image's root sees them, then the mounts kbox
// serves itself (host routes, binds), made when the file is opened.

// mountEntry is one mount of the guest's table, as mountinfo has it.
type mountEntry struct {
	id, parent            int
	dev                   string // major:minor
	root, point, opts     string
	optional              string // optional fields ("shared:1"), if any
	fstype, source, super string
}

// parseMountinfo parses a mountinfo text; lines it cannot read are left
// out.
func parseMountinfo(s string) []mountEntry {
	var out []mountEntry
	for _, l := range strings.Split(s, "\n") {
		pre, post, found := strings.Cut(l, " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 6 || len(g) < 3 {
			continue
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, mountEntry{id: id, parent: parent, dev: f[2], root: f[3], point: f[4], opts: f[5],
			optional: strings.Join(f[6:], " "), fstype: g[0], source: g[1], super: g[2]})
	}
	return out
}

// under reports whether guest path p is dir or beneath it.
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// mergeMounts makes the guest's table from LKL's mounts (as seen from
// the image's root) and kbox's own (host routes, binds: extra): an LKL
// mount at or beneath one of kbox's is hidden by it. kbox's come after
// the root, numbered after LKL's, each the child of the deepest mount
// holding it.
func mergeMounts(lklMounts, extra []mountEntry) []mountEntry {
	var root []mountEntry
	var rest []mountEntry
	maxID := 0
	for _, m := range lklMounts {
		maxID = max(maxID, m.id)
		hidden := false
		for _, x := range extra {
			hidden = hidden || under(m.point, x.point)
		}
		switch {
		case m.point == "/" && len(root) == 0:
			root = append(root, m)
		case !hidden && m.point != "/":
			rest = append(rest, m)
		}
	}
	if len(root) == 0 {
		root = []mountEntry{{id: 1, parent: 1, dev: "0:0", root: "/", point: "/", opts: "rw", fstype: "ext4", source: "/dev/root", super: "rw"}}
		maxID = max(maxID, 1)
	}
	out := append(root, extra...)
	for i := range extra {
		maxID++
		out[1+i].id = maxID
	}
	out = append(out, rest...)
	for i := 1; i <= len(extra); i++ {
		best := out[0]
		for j, m := range out {
			if j != i && m.point != out[i].point && under(out[i].point, m.point) && len(m.point) > len(best.point) {
				best = m
			}
		}
		out[i].parent = best.id
	}
	return out
}

// formatMountinfo is /proc/PID/mountinfo.
func formatMountinfo(ms []mountEntry) string {
	var b strings.Builder
	for _, m := range ms {
		opt := m.optional
		if opt != "" {
			opt = " " + opt
		}
		fmt.Fprintf(&b, "%d %d %s %s %s %s%s - %s %s %s\n", m.id, m.parent, m.dev, m.root, m.point, m.opts, opt, m.fstype, m.source, m.super)
	}
	return b.String()
}

// formatMounts is /proc/PID/mounts: the mount's options, then the
// filesystem's (without its rw or ro, which the mount's say).
func formatMounts(ms []mountEntry) string {
	var b strings.Builder
	for _, m := range ms {
		opts := m.opts
		for _, o := range strings.Split(m.super, ",") {
			if o != "rw" && o != "ro" && o != "" && !strings.Contains(","+opts+",", ","+o+",") {
				opts += "," + o
			}
		}
		fmt.Fprintf(&b, "%s %s %s %s 0 0\n", m.source, m.point, m.fstype, opts)
	}
	return b.String()
}

// formatMountstats is /proc/PID/mountstats.
func formatMountstats(ms []mountEntry) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "device %s mounted on %s with fstype %s\n", m.source, m.point, m.fstype)
	}
	return b.String()
}

// escapeMount escapes a path as the kernel writes it in a mount table.
func escapeMount(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// renameDisks gives LKL's disk devices ("/dev/0000fe00", its name for
// device 254:0) their names from LKL's /proc/partitions ("/dev/vda").
func renameDisks(ms []mountEntry, partitions string) {
	names := map[string]string{}
	for _, l := range strings.Split(partitions, "\n") {
		if f := strings.Fields(l); len(f) == 4 {
			names[f[0]+":"+f[1]] = f[3]
		}
	}
	for i, m := range ms {
		if name, found := names[m.dev]; found && strings.HasPrefix(m.source, "/dev/") {
			ms[i].source = "/dev/" + name
		}
	}
}

// routeMounts describes kbox's host routes in the guest's table.
var routeMounts = map[string][3]string{ // fstype, mount options, filesystem options
	"/proc": {"proc", "rw,nosuid,nodev,noexec,relatime", "rw"},
	"/sys":  {"sysfs", "rw,nosuid,nodev,noexec,relatime", "rw"},
	"/dev":  {"tmpfs", "rw,nosuid,relatime", "rw,mode=755"},
}

// fsNames names the filesystem types a bind's host directory may be on,
// by statfs magic.
var fsNames = map[int64]string{
	0xef53: "ext4", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x01021994: "tmpfs", 0x794c7630: "overlay",
	0x6969: "nfs", 0x65735546: "fuse", 0x2fc12fc1: "zfs", 0xf2f52010: "f2fs", 0x01021997: "9p", 0x4d44: "vfat",
	0x9fa0: "proc", 0x62656572: "sysfs", 0x858458f6: "ramfs",
}

// kboxMounts describes the mounts kbox itself serves: host routes and
// binds (whose host paths the guest never sees).
func kboxMounts(s System) []mountEntry {
	var out []mountEntry
	for _, m := range s.Mounts() {
		if m.Root < 0 {
			d, found := routeMounts[m.Point]
			if !found {
				d = [3]string{"none", "rw", "rw"}
			}
			out = append(out, mountEntry{dev: devOf(-1, m.Point), root: "/", point: escapeMount(m.Point), opts: d[1], fstype: d[0], source: d[0], super: d[2]})
			continue
		}
		fstype := "none"
		var sf unix.Statfs_t
		if unix.Fstatfs(m.Root, &sf) == nil {
			if n, found := fsNames[int64(sf.Type)]; found {
				fstype = n
			}
		}
		rw := "rw"
		if m.ReadOnly {
			rw = "ro"
		}
		out = append(out, mountEntry{dev: devOf(m.Root, ""), root: "/", point: escapeMount(m.Point), opts: rw + ",relatime", fstype: fstype, source: fstype, super: rw})
	}
	return out
}

// devOf is the device (major:minor) the guest sees of host fd, or of
// path when fd is -1.
func devOf(fd int, path string) string {
	var st unix.Stat_t
	var err error
	if fd >= 0 {
		err = unix.Fstat(fd, &st)
	} else {
		err = unix.Stat(path, &st)
	}
	if err != nil {
		return "0:0"
	}
	d := hostdev.Shown(st.Dev)
	return fmt.Sprintf("%d:%d", unix.Major(d), unix.Minor(d))
}

// guestMounts is the guest's mount table: LKL's mounts as the image's
// root sees them (kbox's private mounts, outside that root, do not show),
// then kbox's own.
func guestMounts(s System) []mountEntry {
	var lklMounts []mountEntry
	if cfg := s.Config(); cfg.HasKernelProc {
		if b, err := lkl.ReadFileAt(cfg.KernelProc, "self/mountinfo"); err == nil {
			lklMounts = parseMountinfo(string(b))
		}
		if b, err := lkl.ReadFileAt(cfg.KernelProc, "partitions"); err == nil {
			renameDisks(lklMounts, string(b))
		}
	}
	return mergeMounts(lklMounts, kboxMounts(s))
}

// mountText returns the maker of mounts, mountinfo or mountstats.
func mountText(s System, which string) func() []byte {
	return func() []byte {
		ms := guestMounts(s)
		switch which {
		case "mountinfo":
			return []byte(formatMountinfo(ms))
		case "mountstats":
			return []byte(formatMountstats(ms))
		}
		return []byte(formatMounts(ms))
	}
}
