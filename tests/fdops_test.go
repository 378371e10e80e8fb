//go:build lkl

package tests

import "testing"

// Descriptor operations on virtual fds and across the host/virtual fd
// ranges, and write-back of mapped shadows.
func TestFdOps(t *testing.T) {
	img := copyImage(t, imagePath(t))
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"F_SETFL O_NONBLOCK and O_APPEND on virtual fds", []string{"--", "/opt/tests/fdflags"}, 0, []string{"fdflags ok\n"}, []string{"FAIL"}},
		// A file above the shadow limit is a virtual fd: bash's
		// redirections dup2 it onto a low fd, which kbox bridges with a
		// pipe (dispatch/bridge.go).
		{"dup2 of a virtual fd onto stdio and fd 4", []string{"--", "/bin/bash", "-c",
			"/opt/tests/fdflags mkbig /root/big && echo appended >> /root/big && tail -c 9 /root/big && " +
				"exec 4>>/root/big && echo via4 >&4 && exec 4>&- && tail -c 5 /root/big && " +
				"/opt/tests/hello >> /root/big && tail -n 1 /root/big && cat < /root/big | wc -c && " +
				"{ mkdir /tmp/dd; exec 6</tmp/dd; } 2>&1; { exec 5<>/root/big; } 2>&1; " +
				"/opt/tests/hello >> /root/big"},
			0, []string{"appended\n", "via4\n", "hello from kbox guest\n", "68157476\n", "Is a directory", "Invalid argument"}, nil},
		{"F_DUPFD of host fds into the virtual range keeps a copy of the fd", []string{"-c", "/opt/tests/dupfdhigh < /etc/hostname && cat /root/dupfdhigh.txt"},
			0, []string{"dupfdhigh ok\n", "dupfdhigh gone ok\n", "xy23456789AB"}, []string{"FAIL"}},
		{"msync and close write back a shared writable mapping", []string{"--", "/opt/tests/mmapsync"}, 0, []string{"mmapsync ok\n"}, []string{"FAIL"}},
		{"exit with the mapping open", []string{"--", "/opt/tests/mmapsync", "exit"}, 0, nil, nil},
		{"a later run sees every store", []string{"--", "/opt/tests/mmapsync", "check"}, 0, []string{"at0=msync-data at100=close-data at200=exit-data at300=\n"}, nil},
		{"script $0 is the path given, relative, with .. or absolute", []string{"-c",
			"mkdir -p /tmp/x/sub && printf '#!/bin/sh\\necho zero=$0 one=$1\\n' > /tmp/x/sub/s.sh && printf '#!/bin/bash\\necho bzero=$0 ${BASH_SOURCE[0]}\\n' > /tmp/x/b.sh && " +
				"chmod +x /tmp/x/sub/s.sh /tmp/x/b.sh && cd /tmp/x && ./sub/s.sh a && sub/s.sh b && ./b.sh && cd sub && ../b.sh && /tmp/x/sub/s.sh c"},
			0, []string{"zero=./sub/s.sh one=a\n", "zero=sub/s.sh one=b\n", "bzero=./b.sh ./b.sh\n", "bzero=../b.sh ../b.sh\n", "zero=/tmp/x/sub/s.sh one=c\n"}, nil},
		{"bridged output reached the image", []string{"--", "/bin/sh", "-c", "tail -n 2 /root/big; rm /root/big"},
			0, []string{"hello from kbox guest\nhello from kbox guest\n"}, nil},
	})
}

// A shared writable mapping holds its shadow after its fd is closed: when
// kbox trims its shadows (a program that opens hundreds of files), the
// mapping's node must be kept and its stores reach the image. In the
// in-process tiers the guest's mappings are kbox's own, which the trim
// once did not look at: the stores were lost.
func TestMappedShadowSurvivesTrim(t *testing.T) {
	forEachTier(t, func(t *testing.T, mode string) {
		img := copyImage(t, imagePath(t))
		runCases(t, []string{"image", "-S", img, "--syscall-mode=" + mode}, []guestCase{
			{"map, close, open 600 files, store, munmap", []string{"--", "/opt/tests/mmapsync", "churn"}, 0, []string{"churn done\n"}, nil},
			{"the store reached the image", []string{"--", "/opt/tests/mmapsync", "check"}, 0, []string{"at300=churn-data\n"}, nil},
		})
	})
}
