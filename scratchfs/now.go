package scratchfs

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now is the time a new filesystem's stamps take: the kernel's coarse
// clock, the one time(2) reads and Linux stamps ext4's superblock with.
// time.Now's precise clock can be a second ahead of it just after a
// second begins, and e2fsck run then finds the superblock "written in the
// future".
func Now() time.Time {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return time.Now()
	}
	return time.Unix(ts.Unix())
}
