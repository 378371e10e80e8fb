package dispatch

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func init() {
	register(unix.SYS_MSYNC, sysMsync) // msync(2): write back a mapped writable shadow, then the host's
}

// sysMsync writes back the writable shadow mapped at addr, if any: a
// MAP_SHARED writable mapping of a shadow stores into the memfd, and msync
// is when the guest asks for the file to have them. The host's msync then
// runs as issued.
func sysMsync(e *Engine, r *Request) Result {
	if !e.Shadows.HasWritable() {
		return cont
	}
	ino, ok := shadowMappedAt(r.G.Pid(), r.Args[0])
	if !ok || r.G.Valid() != nil {
		return cont
	}
	if w := e.Shadows.Lookup(ino); w != nil {
		var err error
		asRoot(func() { err = e.Shadows.WriteBack(w) })
		if err != nil {
			os.Stderr.WriteString("kbox: " + err.Error() + "\n")
			return errno(unix.EIO, LKL)
		}
	}
	return cont
}

// shadowMappedAt returns the inode of the writable shadow memfd mapped at
// addr in task tid, from /proc/TID/maps.
func shadowMappedAt(tid int, addr uint64) (uint64, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/maps")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/memfd:kbox-rw:") {
			continue
		}
		lo, hi, okk := strings.Cut(fields[0], "-")
		if !okk {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || addr < start || addr >= end {
			continue
		}
		ino, err := strconv.ParseUint(fields[4], 10, 64)
		return ino, err == nil
	}
	return 0, false
}
