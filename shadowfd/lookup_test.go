package shadowfd

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGuestFdStat: the stat of /proc/PID/fd/N that OfGuestFd makes for
// every fstat the seccomp tier serves is the file the fd is, and
// allocates nothing; a closed fd is an error.
func TestGuestFdStat(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, pid := int(f.Fd()), os.Getpid()
	var want, got unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &want); err != nil {
		t.Fatal(err)
	}
	if err := guestFdStat(pid, fd, &got); err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		t.Fatalf("guestFdStat: %v, dev %d ino %d, want %d %d", err, got.Dev, got.Ino, want.Dev, want.Ino)
	}
	if a := testing.AllocsPerRun(100, func() { guestFdStat(pid, fd, &got) }); a != 0 {
		t.Errorf("guestFdStat allocates %v times", a)
	}
	if err := guestFdStat(pid, 1<<20, &got); err == nil {
		t.Error("a closed fd stats")
	}
}
