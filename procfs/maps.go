package procfs

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A guest process's mappings (/proc/PID/maps and smaps) are the host's,
// where the files kbox maps for it are kbox's own: a program's sealed
// copy (memfd "kbox-exec:PATH"), a shadow's content (a memfd "kbox:PATH"
// or a file of kbox's store), a file of a bind (its host path). The
// guest sees what Linux would show for the image's file: its path,
// device and inode.

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
		b, err := os.ReadFile("/proc/" + hrel)
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
	f := strings.Fields(line)
	if len(f) < 6 || !strings.Contains(f[0], "-") || f[4] == "0" {
		return l
	}
	majS, minS, okDev := strings.Cut(f[3], ":")
	maj, e1 := strconv.ParseUint(majS, 16, 32)
	min, e2 := strconv.ParseUint(minS, 16, 32)
	ino, e3 := strconv.ParseUint(f[4], 10, 64)
	if !okDev || e1 != nil || e2 != nil || e3 != nil {
		return l
	}
	// The path is the rest of the line after the fifth field (a path
	// may hold spaces).
	rest := line
	for k := 0; k < 5; k++ {
		rest = strings.TrimLeft(rest, " ")
		rest = rest[strings.IndexByte(rest+" ", ' '):]
	}
	name := strings.TrimLeft(rest, " ")
	mf, ours := s.MappedFile(unix.Mkdev(uint32(maj), uint32(min)), ino, name)
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

// hex2 is a device number's part as maps shows it: two hex digits at
// least.
func hex2(v uint32) string {
	s := strconv.FormatUint(uint64(v), 16)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}
