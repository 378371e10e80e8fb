//go:build lkl

package tests

import "testing"

// TestImageGuestView: what TestImageContents reads with debugfs, as the
// guest sees it: root on the first line of /etc/passwd and /etc/group,
// the names resolved, and the test programs in the test image only, with
// a login shell's PATH (from /etc/profile) naming no /opt/tests.
func TestImageGuestView(t *testing.T) {
	const firstLines = "head -n 1 /etc/passwd /etc/group /etc/shadow /etc/gshadow"
	common := []guestCase{
		{"first lines", []string{"--", "/bin/sh", "-c", firstLines}, 0,
			[]string{"==> /etc/passwd <==\nroot:x:0:0:root:/root:/bin/sh\n", "==> /etc/group <==\nroot:x:0:\n",
				"==> /etc/shadow <==\nroot:*:", "==> /etc/gshadow <==\nroot:*::\n"}, nil},
		{"names", []string{"--", "/bin/sh", "-c", "id; id kbox; id nobody"}, 0,
			[]string{"uid=0(root) gid=0(root)", "uid=1000(kbox) gid=1000(kbox)", "uid=65534(nobody) gid=65534(nogroup)"}, nil},
		{"login shell PATH", []string{"--", "/bin/sh", "-l", "-c", "echo PATH=$PATH"}, 0,
			[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"}, []string{"/opt/tests"}},
	}
	t.Run("user image", func(t *testing.T) {
		runCases(t, []string{"image", "-S", userImagePath(t), "--read-only"}, append(common,
			guestCase{"no test programs", []string{"--", "/bin/sh", "-c", "ls /opt; ls /opt/tests || echo no-tests"}, 0,
				[]string{"no-tests\n"}, []string{"hello"}}))
	})
	t.Run("test image", func(t *testing.T) {
		runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, append(common,
			guestCase{"test programs", []string{"--", "/bin/sh", "-c", "/opt/tests/hello && ls /opt/tests"}, 0,
				[]string{"hello from kbox guest", "badelf\n", "hello\n"}, nil}))
	})
}
