package lkl

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SectorRange is an inclusive range of 512-byte sectors whose requests
// fail: reads, writes or both (Ops).
type SectorRange struct {
	First, Last uint64
	Ops         FaultOps
}

// FaultOps says which requests of a SectorRange fail.
type FaultOps uint64

const (
	FaultReads  FaultOps = 1
	FaultWrites FaultOps = 2
)

// ParseSectorRanges parses "[r:|w:]FIRST-LAST[,...]" (512-byte sectors,
// both ends included; "N" alone is one sector; "r:" fails only reads of
// the range, "w:" only writes, neither both), the value of
// KBOX_TEST_DISK_EIO.
func ParseSectorRanges(s string) ([]SectorRange, error) {
	var out []SectorRange
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		ops := FaultReads | FaultWrites
		if rest, ok := strings.CutPrefix(part, "r:"); ok {
			part, ops = rest, FaultReads
		} else if rest, ok := strings.CutPrefix(part, "w:"); ok {
			part, ops = rest, FaultWrites
		}
		a, b, isRange := strings.Cut(part, "-")
		first, err1 := strconv.ParseUint(a, 10, 64)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = strconv.ParseUint(b, 10, 64)
		}
		if part == "" || err1 != nil || err2 != nil || last < first {
			return nil, fmt.Errorf("bad sector range %q: want [r:|w:]FIRST-LAST (512-byte sectors, FIRST <= LAST), ranges separated by commas", part)
		}
		out = append(out, SectorRange{first, last, ops})
	}
	if len(out) > 64 {
		return nil, fmt.Errorf("%d sector ranges: at most 64", len(out))
	}
	return out, nil
}

// AddDiskFaulty attaches the host fd as a disk like AddDisk, except that
// every request touching one of ranges fails with an I/O error. It is for
// tests only (KBOX_TEST_DISK_EIO, docs/testing.md).
func AddDiskFaulty(fd int, ranges []SectorRange) (Disk, error) {
	if !Available {
		return Disk{}, ErrNotBuilt
	}
	flat := make([]uint64, 0, 3*len(ranges))
	for _, r := range ranges {
		flat = append(flat, r.First, r.Last, uint64(r.Ops))
	}
	id := diskAddFaulty(fd, flat)
	if id < 0 {
		return Disk{}, fmt.Errorf("lkl: add disk with injected I/O errors: %w", unix.Errno(-id))
	}
	return Disk{ID: id}, nil
}

// FailedRequests is how many requests a disk from AddDiskFaulty has
// failed so far (0 for other disks).
func (d Disk) FailedRequests() uint64 { return diskFailed(d.ID) }
