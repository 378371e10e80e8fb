package procfs

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostdev"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// A guest process's mappings (/proc/PID/maps, smaps, numa_maps) are the host's,
// where the files kbox maps for it are kbox's own: a program's sealed
// copy (memfd "kbox-exec:PATH"), a shadow's content (a memfd "kbox:PATH"
// or a file of kbox's store), a virtual fd's window (memfd
// "kbox-map:PATH", dispatch/sys_mem_map.go), a file of a bind (its host
// path). The guest sees what Linux would show for the image's file: its
// path, device and inode.

// MappedFile is the guest's file behind a host file a guest maps.
type MappedFile struct {
	Path string
	// Dev and Ino are the file's in the guest's kernel (st_dev's
	// encoding), when Known.
	Dev, Ino uint64
	Known    bool
}

// mapsIndent is the column where a mapping's path starts (Linux pads
// the fields before it to 72 characters and a space).
const mapsIndent = 72

// mapsText makes the text of host file /proc/hrel (maps or smaps) with
// kbox's files shown as the guest's.
func mapsText(s System, hrel string) func() []byte {
	return func() []byte {
		b, err := hostproc.Read("/proc/" + hrel)
		if err != nil {
			return nil
		}
		var out bytes.Buffer
		for _, l := range bytes.SplitAfter(b, []byte("\n")) {
			out.WriteString(mapsLine(s, string(l)))
		}
		return out.Bytes()
	}
}

// mapsLine rewrites one line of maps or smaps: a mapping's line when it
// maps a file of kbox's; any other line as it is.
func mapsLine(s System, l string) string {
	line, nl := strings.CutSuffix(l, "\n")
	f, mf, ours := kboxMapping(s, line)
	if !ours {
		return l
	}
	dev, inode := f[3], f[4]
	if mf.Known {
		dev = hex2(unix.Major(mf.Dev)) + ":" + hex2(unix.Minor(mf.Dev))
		inode = strconv.FormatUint(mf.Ino, 10)
	}
	head := strings.Join(append(f[:3:3], dev, inode), " ")
	if len(head) < mapsIndent {
		head += strings.Repeat(" ", mapsIndent-len(head))
	}
	out := head + " " + mf.Path
	if nl {
		out += "\n"
	}
	return out
}

// kboxMapping parses line, a mapping's line of maps or smaps (without its
// newline), and reports whether it maps a file of kbox's, with its fields
// and the guest's file.
func kboxMapping(s System, line string) ([]string, MappedFile, bool) {
	f := strings.Fields(line)
	if len(f) < 6 || !strings.Contains(f[0], "-") || f[4] == "0" {
		return nil, MappedFile{}, false
	}
	majS, minS, okDev := strings.Cut(f[3], ":")
	maj, e1 := strconv.ParseUint(majS, 16, 32)
	min, e2 := strconv.ParseUint(minS, 16, 32)
	ino, e3 := strconv.ParseUint(f[4], 10, 64)
	if !okDev || e1 != nil || e2 != nil || e3 != nil {
		return nil, MappedFile{}, false
	}
	// The path is the rest of the line after the fifth field (a path
	// may hold spaces).
	rest := line
	for k := 0; k < 5; k++ {
		rest = strings.TrimLeft(rest, " ")
		rest = rest[strings.IndexByte(rest+" ", ' '):]
	}
	mf, ours := mappedFile(s, unix.Mkdev(uint32(maj), uint32(min)), ino, strings.TrimLeft(rest, " "))
	return f, mf, ours
}

// mappedFile finds the guest's file behind host file (dev, ino) that a
// guest maps, named name in the host's maps: a shadow's content (by its
// host inode), a program's or script's sealed copy and a /proc text (by
// the memfd's name, which kbox gave it), a file of a bind (by its host
// path). The device and inode are LKL's for an image file. ours is false
// for a file that is not kbox's.
func mappedFile(s System, dev, ino uint64, name string) (mf MappedFile, ours bool) {
	bare, deleted := strings.CutSuffix(name, " (deleted)")
	if node := s.Shadow(dev, ino); node != nil {
		mf.Path = LKLFdPath(s.Config(), node.LKLFd(), node.Path())
		if st, err := lkl.Fstat(node.LKLFd()); err == nil {
			mf.Dev, mf.Ino, mf.Known = st.Dev, st.Ino, true
		}
		return mf, true
	}
	for _, prefix := range []string{"/memfd:kbox-exec:", "/memfd:kbox-script:", "/memfd:kbox-map:", "/memfd:kbox:"} {
		if p, found := strings.CutPrefix(bare, prefix); found {
			mf.Path = s.Canonical(p) // the exec'd path may be a link's
			if st, err := lkl.Stat(p, false); err == nil {
				mf.Dev, mf.Ino, mf.Known = st.Dev, st.Ino, true
			}
			return mf, true
		}
	}
	if g, inBind := s.BindPath(bare); inBind && strings.HasPrefix(bare, "/") {
		mf.Path = g
		if deleted {
			mf.Path += " (deleted)"
		}
		// A bind's file is the host's: its inode, and its device as
		// the guest sees it.
		mf.Dev, mf.Ino, mf.Known = hostdev.Shown(dev), ino, true
		return mf, true
	}
	return mf, false
}

// numaMapsText makes the text of /proc/hbase/numa_maps with kbox's files
// named as the guest's: numa_maps gives a mapping's start and its file's
// name only, so the host's maps, read next, tells which are kbox's.
func numaMapsText(s System, hbase string) func() []byte {
	return func() []byte {
		b, err := hostproc.Read("/proc/" + hbase + "/numa_maps")
		if err != nil {
			return nil
		}
		m, _ := hostproc.Read("/proc/" + hbase + "/maps")
		names := map[string]string{} // a mapping's start → the guest's file
		for _, l := range strings.Split(string(m), "\n") {
			if f, mf, ours := kboxMapping(s, l); ours {
				start, _, _ := strings.Cut(f[0], "-")
				names[start] = mf.Path
			}
		}
		var out bytes.Buffer
		for _, l := range strings.SplitAfter(string(b), "\n") {
			out.WriteString(numaLine(l, names))
		}
		return out.Bytes()
	}
}

// numaLine rewrites the file= of one line of numa_maps whose mapping's
// start is in names.
func numaLine(l string, names map[string]string) string {
	start, rest, found := strings.Cut(l, " ")
	p, ours := names[start]
	if !found || !ours {
		return l
	}
	w := strings.Split(rest, " ")
	for i := range w {
		if strings.HasPrefix(w[i], "file=") {
			w[i] = "file=" + numaEscaper.Replace(p)
		}
	}
	return start + " " + strings.Join(w, " ")
}

// numaEscaper escapes a path as numa_maps does (octal, for the characters
// that would end its field).
var numaEscaper = strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, "=", `\075`)

// hex2 is a device number's part as maps shows it: two hex digits at
// least.
func hex2(v uint32) string {
	s := strconv.FormatUint(uint64(v), 16)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}
