//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNetRawICMP: raw ICMP sockets are LKL's, and LKL asks CAP_NET_RAW of
// the guest's credentials: guest root pings (busybox's ping opens a raw
// socket and nothing else; tests/guest/rawicmp.c sends an echo on a raw
// socket and reads the reply with its IP header, IPv4 and IPv6, its lines
// compared with the same program run natively as root), a guest user
// without the capability gets EPERM, as on Linux. Without --net the
// guest's loopback answers; with it the gateway does (the user-mode
// stack's own address), and no ICMP leaves through the user-mode stack:
// a public address gets no answer, and ping ends when its wait does.
// Before, every raw internet socket was EPERM, even for guest root
// (busybox ping: "permission denied (are you root?)").
func TestNetRawICMP(t *testing.T) {
	native := nativeGuest(t, "rawicmp")
	if os.Geteuid() != 0 {
		native = "" // a raw socket natively needs CAP_NET_RAW
	}
	rawLines := func(out string) string {
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "raw ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	echo := []string{"raw socket: ok", "raw send: ok", "raw echo reply: ok", "datagram socket: ok", "datagram send: ok", "datagram echo reply: ok"}
	forEachTier(t, func(t *testing.T, tier string) {
		local := []string{"image", "-S", imagePath(t), "--syscall-mode=" + tier}
		user := []string{"image", "-R", imagePath(t), "--read-only", "--change-id", "1000:1000", "--syscall-mode=" + tier}
		for _, addr := range []string{"127.0.0.1", "::1"} {
			t.Run("rawicmp "+addr, func(t *testing.T) {
				stdout, stderr, status := runKbox(t, append(local, "--", "/opt/tests/rawicmp", addr)...)
				if status != 0 || stdout != strings.Join(echo, "\n")+"\n" {
					t.Fatalf("status %d, stdout:\n%s\nwant:\n%s\nstderr: %s", status, stdout, strings.Join(echo, "\n"), lastLines(stderr, 10))
				}
				if native == "" {
					return
				}
				b, err := exec.Command(native, addr).Output()
				if err != nil {
					t.Fatalf("native: %v\n%s", err, b)
				}
				if rawLines(stdout) != rawLines(string(b)) {
					t.Errorf("kbox:\n%s\nnative:\n%s", rawLines(stdout), rawLines(string(b)))
				}
			})
		}
		runCases(t, nil, []guestCase{
			{name: "busybox ping", args: append(local, "--", "/bin/busybox", "ping", "-c", "2", "127.0.0.1"),
				want: []string{"64 bytes from 127.0.0.1: seq=0", "2 packets transmitted, 2 packets received, 0% packet loss"}},
			{name: "busybox ping6", args: append(local, "--", "/bin/busybox", "ping6", "-c", "1", "::1"),
				want: []string{"1 packets transmitted, 1 packets received"}},
			{name: "rawicmp uid1000", args: append(user, "--", "/opt/tests/rawicmp", "127.0.0.1"),
				want: []string{"raw socket: Operation not permitted\n", "datagram socket: ok", "datagram echo reply: ok"}},
			{name: "busybox ping uid1000", status: 1, args: append(user, "--", "/bin/busybox", "ping", "-c", "1", "127.0.0.1"),
				not: []string{"bytes from"}},
			{name: "busybox ping --net", args: append(tierNetArgs(t, tier), "--", "/bin/busybox", "ping", "-c", "1", "10.0.2.2"),
				want: []string{"1 packets transmitted, 1 packets received"}},
			{name: "busybox ping --net outside", status: 1, args: append(tierNetArgs(t, tier), "--", "/bin/busybox", "ping", "-c", "1", "-W", "1", "192.0.2.1"),
				want: []string{"1 packets transmitted, 0 packets received, 100% packet loss"}},
		})
	})
}
