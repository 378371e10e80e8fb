package sysvipc

import (
	"testing"

	"golang.org/x/sys/unix"
)

// fakeMq is a namespace of queues by name, as the binder's kernel keeps
// them: it opens (an fd of /dev/null stands for the queue), makes and
// removes them, and counts the fds it gave and that are still open.
type fakeMq struct {
	names map[string]bool
	given []int
}

func (f *fakeMq) MqOpen(name string, oflag uint32, attr []byte) (int, bool, error) {
	made := false
	switch {
	case f.names[name] && oflag&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL:
		return -1, false, unix.EEXIST
	case !f.names[name] && oflag&unix.O_CREAT == 0:
		return -1, false, unix.ENOENT
	case !f.names[name]:
		f.names[name], made = true, true
	}
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, err
	}
	f.given = append(f.given, fd)
	return fd, made, nil
}

func (f *fakeMq) MqUnlink(name string) error {
	if !f.names[name] {
		return unix.ENOENT
	}
	delete(f.names, name)
	return nil
}

// open reports whether fd is still open.
func open(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// TestQueues: a sequence of mq_open and mq_unlink calls by different
// guest users, each with the errno Linux gives (tests/guest/mqperm.c has
// the same rules against the kernel): the owner and mode a queue gets
// (less the umask), the access each access mode asks for by owner,
// group and others, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, the
// owner's or CAP_FOWNER's removal, EEXIST before permission, and the fd
// of a refused open closed.
func TestQueues(t *testing.T) {
	root := Who{Caps: 1<<capDacOverride | 1<<capDacReadSearch | 1<<capFowner}
	nobody, member, readSearch := user(65534, 65534), user(1000, 1000, 4321), user(1001, 1001)
	readSearch.Caps = 1 << capDacReadSearch
	inGroup := root
	inGroup.FSGID = 4321
	b := &fakeMq{names: map[string]bool{}}
	var q Queues
	steps := []struct {
		name   string
		unlink bool
		w      Who
		q      string
		oflag  uint32
		mode   uint32
		umask  uint32
		want   unix.Errno
	}{
		{"root makes 666 under umask 022", false, root, "r", unix.O_CREAT | unix.O_EXCL | unix.O_RDWR, 0o666, 0o22, 0},
		{"nobody reads 644", false, nobody, "r", unix.O_RDONLY, 0, 0, 0},
		{"nobody cannot write 644", false, nobody, "r", unix.O_WRONLY, 0, 0, unix.EACCES},
		{"nobody cannot read-write 644", false, nobody, "r", unix.O_RDWR, 0, 0, unix.EACCES},
		{"O_CREAT of an existing queue is an open", false, nobody, "r", unix.O_CREAT | unix.O_RDWR, 0o666, 0, unix.EACCES},
		{"EEXIST comes before permission", false, nobody, "r", unix.O_CREAT | unix.O_EXCL | unix.O_RDWR, 0o666, 0, unix.EEXIST},
		{"nobody cannot remove root's", true, nobody, "r", 0, 0, 0, unix.EACCES},
		{"root makes 060 as group 4321", false, inGroup, "g", unix.O_CREAT | unix.O_RDWR, 0o060, 0, 0},
		{"a member of 4321 read-writes 060", false, member, "g", unix.O_RDWR, 0, 0, 0},
		{"nobody cannot read 060", false, nobody, "g", unix.O_RDONLY, 0, 0, unix.EACCES},
		{"a member cannot remove it", true, member, "g", 0, 0, 0, unix.EACCES},
		{"nobody makes 666 under umask 077", false, nobody, "n", unix.O_CREAT | unix.O_RDWR, 0o666, 0o77, 0},
		{"a user cannot read 600", false, member, "n", unix.O_RDONLY, 0, 0, unix.EACCES},
		{"CAP_DAC_READ_SEARCH reads 600", false, readSearch, "n", unix.O_RDONLY, 0, 0, 0},
		{"CAP_DAC_READ_SEARCH does not write", false, readSearch, "n", unix.O_WRONLY, 0, 0, unix.EACCES},
		{"root read-writes nobody's 600", false, root, "n", unix.O_RDWR, 0, 0, 0},
		{"nobody removes its own", true, nobody, "n", 0, 0, 0, 0},
		{"and it is gone", true, nobody, "n", 0, 0, 0, unix.ENOENT},
		{"nobody makes it again, 600", false, nobody, "n", unix.O_CREAT | unix.O_WRONLY, 0o600, 0, 0},
		{"root removes nobody's", true, root, "n", 0, 0, 0, 0},
		{"a queue kbox did not see made is the kernel's", false, nobody, "x", unix.O_RDWR, 0, 0, 0},
	}
	b.names["x"] = true
	for _, s := range steps {
		var err error
		if s.unlink {
			err = q.Unlink(b, &s.w, s.q)
		} else {
			var fd int
			before := len(b.given)
			fd, _, err = q.Open(b, &s.w, s.q, s.oflag, s.mode, s.umask, nil)
			if err == nil && !open(fd) {
				t.Errorf("%s: the fd given is closed", s.name)
			}
			if err == unix.EACCES && len(b.given) > before && open(b.given[before]) {
				t.Errorf("%s: refused, but the binder's fd is still open", s.name)
			}
			if err == nil {
				unix.Close(fd)
			}
		}
		var got unix.Errno
		if err != nil {
			got = err.(unix.Errno)
		}
		if got != s.want {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	// A queue made for a call that then failed is gone, record and all.
	fd, made, err := q.Open(b, &nobody, "u", unix.O_CREAT|unix.O_RDWR, 0o600, 0, nil)
	if err != nil || !made {
		t.Fatalf("making u: %v made %v", err, made)
	}
	unix.Close(fd)
	q.Unmake(b, "u")
	if _, known := q.qs["u"]; known || b.names["u"] {
		t.Errorf("after Unmake: recorded %v, in the namespace %v", known, b.names["u"])
	}
	if o := q.qs["r"]; o.UID != 0 || o.Mode != 0o644 {
		t.Errorf("root's queue: uid %d mode %o, want 0 and 644", o.UID, o.Mode)
	}
	if o := q.qs["g"]; o.GID != 4321 || o.Mode != 0o060 {
		t.Errorf("the group's queue: gid %d mode %o, want 4321 and 060", o.GID, o.Mode)
	}
}
