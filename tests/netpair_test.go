//go:build lkl

package tests

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNetPairSendBuffer: the guest's end of a connected TCP socket (a
// host socketpair, docs/networking.md "Sockets and readiness") has a
// send buffer of 1 MiB (kbox asks 512 KiB, the kernel doubles it), not
// the host's default 208 KiB: a guest writing 64 KiB at a time would
// otherwise block after three writes and be woken for each one the pump
// reads ("Bulk throughput"). The test takes a copy of the guest's socket
// (pidfd_getfd) while `inet hold` keeps it open, and asks its buffer.
func TestNetPairSendBuffer(t *testing.T) {
	wmemMax := 0
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_max"); err == nil {
		wmemMax, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	want := 2 * min(512<<10, wmemMax)
	if want <= 212992 {
		t.Skipf("the host's net.core.wmem_max (%d) caps the buffer at its default", wmemMax)
	}
	port := strconv.Itoa(echoServer(t))
	var bufs []int
	out, se, err := converseKbox(t, func(line string, in io.WriteCloser, pid int) {
		if line == "held 1" {
			bufs = guestSocketSendBuffers(t, pid)
			in.Close()
		}
	}, append(netArgs(t, "--syscall-mode=seccomp", "--net-allow", "127.0.0.1:"+port, "--"),
		"/opt/tests/inet", "hold", "10.0.2.2", port, "1")...)
	if err != nil {
		t.Fatalf("kbox: %v\nstdout: %s\nstderr: %s", err, out, se)
	}
	if !strings.Contains(out, "all 1 echoed\n") {
		t.Errorf("stdout lacks the echo:\n%s\nstderr: %s", out, se)
	}
	if len(bufs) != 1 || bufs[0] != want {
		t.Errorf("the guest's socket fds have send buffers %v, want one of %d", bufs, want)
	}
}

// guestSocketSendBuffers finds the guest process below kbox (pid kpid)
// running /opt/tests/inet and returns SO_SNDBUF of each of its socket
// fds below the virtual fd range.
func guestSocketSendBuffers(t *testing.T, kpid int) []int {
	t.Helper()
	parent := map[int]int{}
	var inets []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
		if strings.HasSuffix(s[:i], "(inet") {
			inets = append(inets, pid)
		}
	}
	guest := 0
	for _, pid := range inets {
		for p, n := parent[pid], 0; p > 1 && n < 16; p, n = parent[p], n+1 {
			if p == kpid {
				guest = pid
			}
		}
	}
	if guest == 0 {
		t.Fatalf("no guest process inet under kbox %d", kpid)
	}
	pidfd, err := unix.PidfdOpen(guest, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", guest, err)
	}
	defer unix.Close(pidfd)
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(guest) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var bufs []int
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		link, _ := os.Readlink("/proc/" + strconv.Itoa(guest) + "/fd/" + e.Name())
		if fd >= 1024 || !strings.HasPrefix(link, "socket:") {
			continue
		}
		c, err := unix.PidfdGetfd(pidfd, fd, 0)
		if err != nil {
			t.Fatalf("pidfd_getfd %d: %v", fd, err)
		}
		if typ, _ := unix.GetsockoptInt(c, unix.SOL_SOCKET, unix.SO_TYPE); typ == unix.SOCK_STREAM {
			v, err := unix.GetsockoptInt(c, unix.SOL_SOCKET, unix.SO_SNDBUF)
			if err != nil {
				t.Fatal(err)
			}
			bufs = append(bufs, v)
		}
		unix.Close(c)
	}
	return bufs
}

// TestNetIdleThreads: an idle connection holds no kbox thread. The guest
// holds 300 connections to a host echo server open at once (inet hold);
// while they wait, kbox has about as many threads as with none, since
// no kbox thread waits inside LKL for a socket (package lklready).
// Before, each connection's pump waited in LKL's recv on a thread of its
// own (and an LKL task): 300 more threads. Then every connection echoes
// again, so none was lost while idle. In the seccomp tier (kbox's own
// threads) and the trap tier (the guest's thread in kbox's process).
func TestNetIdleThreads(t *testing.T) {
	port := strconv.Itoa(echoServer(t))
	const conns = 300
	forTiers(t, []string{"seccomp", "trap"}, func(t *testing.T, tier string) {
		threads := -1
		out, se, err := converseKbox(t, func(line string, in io.WriteCloser, pid int) {
			if line == "held "+strconv.Itoa(conns) {
				threads = processThreads(t, pid)
				in.Close()
			}
		}, tierNetArgs(t, tier, "--read-only", "--net-allow", "127.0.0.1:"+port, "--",
			"/opt/tests/inet", "hold", "10.0.2.2", port, strconv.Itoa(conns))...)
		if err != nil {
			t.Fatalf("kbox: %v\nstdout: %s\nstderr: %s", err, out, se)
		}
		if !strings.Contains(out, "all "+strconv.Itoa(conns)+" echoed\n") {
			t.Errorf("stdout lacks the second echo:\n%s\nstderr: %s", out, se)
		}
		t.Logf("kbox's threads with %d idle connections: %d", conns, threads)
		if threads < 0 || threads > 80 {
			t.Errorf("kbox has %d threads with %d idle connections: a thread per connection?", threads, conns)
		}
	})
}

// processThreads is the Threads: line of /proc/PID/status.
func processThreads(t *testing.T, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Errorf("status of kbox: %v", err)
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
