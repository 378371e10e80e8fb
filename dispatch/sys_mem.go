// The mem family: msync of mapped shadows (FamMem in table.go).

package dispatch

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// sysMsync serves msync(2) of shared mappings of shadows.
func sysMsync(e *Engine, r *Request) Result {
	// Stores through them land in the node's content file, and MS_SYNC is
	// when the guest asks for the file to have them, so every node mapped in
	// the range is written back and synced in LKL (a failed write-back is
	// reported here, as Linux's msync reports writeback errors). The host's
	// msync then runs as issued (it checks the range and flags). MS_ASYNC
	// asks for nothing that is not already true on Linux since 2.6.19.
	if r.Args[2]&unix.MS_SYNC == 0 {
		return cont
	}
	nodes := nodesMappedIn(e.Shadows, r.G.Pid(), r.Args[0], r.Args[0]+r.Args[1])
	if len(nodes) == 0 || r.G.Valid() != nil {
		return cont
	}
	for _, n := range nodes {
		if err := e.Shadows.Fsync(n, true); err != nil {
			return fail(err, LKL)
		}
	}
	return cont
}

// nodesMappedIn returns the shadow nodes mapped in [lo, hi) of task tid,
// from /proc/TID/maps.
func nodesMappedIn(m *shadowfd.Manager, tid int, lo, hi uint64) []*shadowfd.Node {
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []*shadowfd.Node
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset major:minor inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[4] == "0" || !strings.Contains(fields[1], "s") {
			continue
		}
		a, b, okk := strings.Cut(fields[0], "-")
		if !okk {
			continue
		}
		start, err1 := strconv.ParseUint(a, 16, 64)
		end, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil || end <= lo || start >= hi {
			continue
		}
		maj, mnr, okk := strings.Cut(fields[3], ":")
		ma, err1 := strconv.ParseUint(maj, 16, 32)
		mi, err2 := strconv.ParseUint(mnr, 16, 32)
		ino, err3 := strconv.ParseUint(fields[4], 10, 64)
		if !okk || err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if n := m.Lookup(unix.Mkdev(uint32(ma), uint32(mi)), ino); n != nil {
			out = append(out, n)
		}
	}
	return out
}
