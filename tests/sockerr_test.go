//go:build lkl

package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSockErrors: socket calls whose errors and behaviour LTP checks
// (send01, send02, sendmsg01, accept03, socket01), by tests/guest/sockerr.c on the
// guest's own loopback in each tier, compared line by line with the same
// program run natively, and with the lines Linux gives. Before:
//   - udpbig: a plain send or write of a UDP datagram over 64 KiB went
//     into the socket's pair and was dropped by the pump (Linux:
//     EMSGSIZE);
//   - more: MSG_MORE did not hold a plain send back (the pair has none),
//     so 16 bytes arrived at once where Linux waits for the next send;
//   - tcpnc: sendmsg with an address on an unconnected TCP socket gave
//     EAFNOSUPPORT (Linux: EPIPE);
//   - rights: sendmsg with an address and SCM_RIGHTS whose control data
//     ends unaligned (msg_controllen CMSG_LEN(4)) gave EINVAL: the
//     credentials kbox adds were put at an unaligned offset;
//   - opath: socket calls on an O_PATH fd gave ENOTSOCK (Linux: EBADF);
//   - socktype: socket(2) of an internet type past SOCK_PACKET gave
//     ESOCKTNOSUPPORT (Linux: EINVAL).
func TestSockErrors(t *testing.T) {
	native := nativeGuest(t, "sockerr")
	img := imagePath(t)
	want := map[string][]string{
		"udpbig": {"ipv4 send 128 KiB: -1 Message too large", "ipv4 send max+2: -1 Message too large",
			"ipv4 write max+2: -1 Message too large", "ipv4 sendto max+1: -1 Message too large",
			"ipv4 send max: 65507", "ipv4 received: 65507", "ipv4 received next: 1",
			"ipv6 send 128 KiB: -1 Message too large", "ipv6 send max+2: -1 Message too large",
			"ipv6 write max+2: -1 Message too large", "ipv6 sendto max+1: -1 Message too large",
			"ipv6 send max: 65527", "ipv6 received: 65527", "ipv6 received next: 1"},
		"more": {"tcp send: MSG_MORE held 50 rounds", "udp send: MSG_MORE held 50 rounds",
			"udp sendto: MSG_MORE held 50 rounds", "udp sendmsg: MSG_MORE held 50 rounds"},
		"tcpnc": {"sendmsg with an address: -1 Broken pipe", "sendmsg without one: -1 Broken pipe",
			"sendto with an address: -1 Broken pipe", "send: -1 Broken pipe"},
		"rights": {"sendmsg SCM_RIGHTS with an address: 8", "recvmsg: 8", "received fd reads: 11",
			"it holds: passed file"},
		"opath": {"accept: -1 Bad file descriptor", "accept4: -1 Bad file descriptor",
			"bind: -1 Bad file descriptor", "connect: -1 Bad file descriptor", "listen: -1 Bad file descriptor",
			"getsockname: -1 Bad file descriptor", "getsockopt: -1 Bad file descriptor",
			"sendto: -1 Bad file descriptor", "recv: -1 Bad file descriptor", "shutdown: -1 Bad file descriptor"},
		"socktype": {"inet type 75: -1 Invalid argument", "inet type 11: -1 Invalid argument",
			"inet6 type 15: -1 Invalid argument", "inet stream with flag 0x100: -1 Invalid argument",
			"inet dgram with SOCK_NONBLOCK: 0"},
	}
	modes := []string{"udpbig", "more", "tcpnc", "rights", "opath", "socktype"}
	args := func(mode, dir string) []string {
		if mode == "rights" {
			return []string{mode, dir}
		}
		return []string{mode}
	}
	nativeOut := map[string]string{}
	if native != "" {
		for _, mode := range modes {
			b, err := exec.Command(native, args(mode, t.TempDir())...).Output()
			if err != nil {
				t.Fatalf("native %s: %v\n%s", mode, err, b)
			}
			nativeOut[mode] = string(b)
		}
	}
	forEachTier(t, func(t *testing.T, tier string) {
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				stdout, stderr, status := runKbox(t, append([]string{"image", "-S", img, "--read-only", "--trusted",
					"--syscall-mode=" + tier, "--", "/opt/tests/sockerr"}, args(mode, "/tmp")...)...)
				w := want[mode]
				if mode == "rights" && tier != "seccomp" {
					// In one process, the fd received is not one the
					// guest may use (EBADF): a limit of the in-process
					// tiers, apart from the send checked here.
					w = w[:2]
					stdout = strings.Join(strings.SplitAfter(stdout, "\n")[:min(2, strings.Count(stdout, "\n"))], "")
				}
				if status != 0 {
					t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
				}
				if n, ok := nativeOut[mode]; ok && (mode != "rights" || tier == "seccomp") && stdout != n {
					t.Errorf("kbox:\n%s\nnative:\n%s\nstderr: %s", stdout, n, stderr)
				}
				if got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"); !containsInOrder(got, w) {
					t.Errorf("stdout lacks (in order) %q:\n%s\nstderr: %s", w, stdout, stderr)
				}
			})
		}
	})
}

// containsInOrder says lines holds each of want, in want's order.
func containsInOrder(lines, want []string) bool {
	i := 0
	for _, l := range lines {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	return i == len(want)
}
