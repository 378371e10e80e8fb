package sysvipc

import "testing"

// TestShown: the guest's owners, mode and creator pid replace the
// kernel's in /proc/sysvipc/shm, right-aligned as the kernel prints them;
// objects kbox does not know stay as they are.
func TestShown(t *testing.T) {
	var s State
	s.put(Shm, 5, Obj{UID: 65534, GID: 65534, CUID: 0, CGID: 0, Mode: 0o640, Cpid: 1234})
	in := "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n" +
		"         0          5  1700                  4096    77     0      0     0     0     0     0          0          0 1700000000                     0                     0\n" +
		"         0          6  1700                  4096    77     0      0     0     0     0     0          0          0 1700000000                     0                     0\n"
	want := "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n" +
		"         0          5  1640                  4096  1234     0      0 65534 65534     0     0          0          0 1700000000                     0                     0\n" +
		"         0          6  1700                  4096    77     0      0     0     0     0     0          0          0 1700000000                     0                     0\n"
	if got := string(s.Shown("shm", []byte(in))); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestShownColumns: each file's columns (msg and sem have no cpid), and
// text kbox does not change.
func TestShownColumns(t *testing.T) {
	var s State
	s.put(Msg, 1, Obj{UID: 7, GID: 8, CUID: 9, CGID: 10, Mode: 0o600})
	s.put(Sem, 2, Obj{UID: 7, GID: 8, CUID: 9, CGID: 10, Mode: 0o444})
	cases := []struct{ name, in, want string }{
		{"msg",
			"key msqid perms cbytes qnum lspid lrpid uid gid cuid cgid\n0 1 1700 0 0 5 6 0 0 0 0\n",
			"key msqid perms cbytes qnum lspid lrpid uid gid cuid cgid\n0 1 1600 0 0 5 6 7 8 9 10\n"},
		{"sem",
			"key semid perms nsems uid gid cuid cgid\n0 2 1777 1 0 0 0 0\n",
			"key semid perms nsems uid gid cuid cgid\n0 2 1444 1 7 8 9 10\n"},
		{"sem", "key semid perms nsems uid gid cuid cgid\n0 3 1777 1 0 0 0 0\n",
			"key semid perms nsems uid gid cuid cgid\n0 3 1777 1 0 0 0 0\n"},
		{"sem", "key semid perms nsems uid gid cuid cgid\n0 2 1777 1 0 0\n",
			"key semid perms nsems uid gid cuid cgid\n0 2 1777 1 0 0\n"},
		{"sem", "key semid perms nsems uid gid cuid cgid\n0 2 rwx 1 0 0 0 0\n",
			"key semid perms nsems uid gid cuid cgid\n0 2 rwx 1 0 0 0 0\n"},
		{"foo", "0 1 1700 0 0 5 6 0 0 0 0\n", "0 1 1700 0 0 5 6 0 0 0 0\n"},
		{"msg", "", ""},
	}
	for _, c := range cases {
		if got := string(s.Shown(c.name, []byte(c.in))); got != c.want {
			t.Errorf("%s %q: got %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// TestReplaceColumns: values right-aligned in the old field's width,
// wider ones taking the gap but one space, the rest of the line kept.
func TestReplaceColumns(t *testing.T) {
	cases := []struct {
		line string
		set  map[int]string
		want string
	}{
		{"   a    b\n", map[int]string{1: "c"}, "   a    c\n"},
		{"   a    b\n", map[int]string{1: "ccc"}, "   a  ccc\n"},
		{"   a    b\n", map[int]string{1: "cccccc"}, "   a cccccc\n"},
		{"   a  bbb\n", map[int]string{1: "c"}, "   a    c\n"},
		{"   a    b", map[int]string{0: "x", 1: "y"}, "   x    y"},
		{"a\tb c", map[int]string{2: "dd"}, "a\tb dd"},
		{"   a    b\n", map[int]string{5: "z"}, "   a    b\n"},
		{"   a    b\n", map[int]string{1: "b"}, "   a    b\n"},
		{"", map[int]string{0: "x"}, ""},
	}
	for _, c := range cases {
		if got := replaceColumns(c.line, c.set); got != c.want {
			t.Errorf("replaceColumns(%q, %v) = %q, want %q", c.line, c.set, got, c.want)
		}
	}
}

// TestIsSysctl: the IPC namespace's files of /proc/sys, and no other.
func TestIsSysctl(t *testing.T) {
	for name, want := range map[string]bool{"kernel/msgmnb": true, "kernel/shmmax": true, "kernel/sem": true,
		"kernel/shm_rmid_forced": true, "fs/mqueue/queues_max": true, "fs/mqueue/msgsize_default": true,
		"msgmnb": false, "kernel/hostname": false, "kernel/ns_last_pid": false, "": false, "kernel/msgmnb/": false,
		"fs/mqueue": false, "fs/file-max": false} {
		if got := IsSysctl(name); got != want {
			t.Errorf("IsSysctl(%q) = %v, want %v", name, got, want)
		}
	}
}
