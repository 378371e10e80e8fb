//go:build lkl

package tests

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Networking's services (docs/networking.md): the guest's DNS responder
// and resolv.conf, published ports (-p), the observatory's view of
// sockets, and servers in the guest. As in net_test.go, every server
// listens on 127.0.0.1 only.

// TestNetDNS resolves through the responder at 10.0.2.3, whose upstream
// is a fake resolver on 127.0.0.1 (never the host's).
func TestNetDNS(t *testing.T) {
	// kbox.test is a documentation address, web.kbox.test the gateway
	// (the host's 127.0.0.1).
	dns, queries := countedDNS(t, map[string][4]byte{"kbox.test.": {192, 0, 2, 77}, "web.kbox.test.": {10, 0, 2, 2}})
	forEachTier(t, func(t *testing.T, tier string) {
		runCases(t, nil, []guestCase{
			{name: "lookup", args: tierNetArgs(t, tier, "--dns", dns, "--", "/bin/busybox", "nslookup", "kbox.test", "10.0.2.3"),
				want: []string{"192.0.2.77"}},
			{name: "nxdomain", args: tierNetArgs(t, tier, "--dns", dns, "--", "/bin/busybox", "nslookup", "nothere.test", "10.0.2.3"),
				status: 1, not: []string{"192.0.2.77"}},
		})
	})
	if queries.Load() == 0 {
		t.Errorf("the fake upstream saw no query")
	}
}

// TestNetResolvConf: with --net the guest's /etc/resolv.conf names the
// responder and its /etc/hosts has localhost and the hostname, so names
// resolve with no server named (musl's resolver, busybox's nslookup and
// wget), read-only images too; the image's own files are unchanged.
func TestNetResolvConf(t *testing.T) {
	dns := fakeDNS(t, map[string][4]byte{"web.kbox.test.": {10, 0, 2, 2}})
	body := "by name " + rand.Text()
	port, hits := httpServer(t, body)
	p := strconv.Itoa(port)
	img := copyImage(t, imagePath(t))
	hostsBefore, _ := debugfsCat(t, img, "/etc/hosts")
	if _, has := debugfsCat(t, img, "/etc/resolv.conf"); has {
		t.Fatalf("the test image has a resolv.conf: this test wants none")
	}
	// nslookup (busybox's own resolver) and inet http (musl's
	// getaddrinfo) name no server: resolv.conf does. The image's glibc
	// programs look up hosts in files only (its nsswitch.conf): busybox
	// wget finds localhost in kbox's hosts file.
	script := "cat /etc/resolv.conf; cat /etc/hosts; echo; nslookup web.kbox.test; /opt/tests/inet http web.kbox.test " + p + "; " +
		"/opt/tests/inet http $(hostname) 1; wget -qO- http://localhost:1/ 2>&1; echo x >> /etc/resolv.conf; echo write=$?"
	for _, ro := range []bool{false, true} {
		args := []string{"image", "-S", img, "--net", "--dns", dns, "--net-allow", "127.0.0.1:" + p}
		name := "read-write"
		if ro {
			args, name = append(args, "--read-only"), "read-only"
		}
		runCases(t, nil, []guestCase{{name: name, args: append(args, "--", "/bin/sh", "-c", script),
			want: []string{"nameserver 10.0.2.3", "127.0.0.1\tlocalhost", "10.0.2.15\tkbox-rootfs", "Address: 10.0.2.2",
				"resolved web.kbox.test to 10.0.2.2", body, "resolved kbox-rootfs to 10.0.2.15", "connect: Connection refused",
				"(127.0.0.1): Connection refused", "write=1"}}})
	}
	if hits.Load() != 2 {
		t.Errorf("the server saw %d requests by name, want 2", hits.Load())
	}
	if hostsAfter, _ := debugfsCat(t, img, "/etc/hosts"); hostsAfter != hostsBefore {
		t.Errorf("the image's /etc/hosts changed:\n%s\nwas:\n%s", hostsAfter, hostsBefore)
	}
	if _, has := debugfsCat(t, img, "/etc/resolv.conf"); has {
		t.Errorf("the image has a resolv.conf after the runs")
	}
	assertCleanImage(t, img)
}

// freePort is a 127.0.0.1 TCP and UDP port free just now.
func freePort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 20; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		ln.Close()
		if err == nil {
			pc.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// publishedRun starts kbox with a guest server behind --publish and
// returns its result channel.
func publishedRun(t *testing.T, args ...string) <-chan [3]string {
	done := make(chan [3]string, 1)
	go func() {
		out, errOut, status := runKbox(t, args...)
		done <- [3]string{out, errOut, strconv.Itoa(status)}
	}()
	return done
}

// TestNetPublish reaches a guest TCP server from the host through
// --publish (-P): 1 MB each way, the host's half-close reaching the guest
// as EOF and the guest's answer after it; a published port with no guest
// listener resets the host's connection; UDP datagrams come back.
func TestNetPublish(t *testing.T) {
	forEachTier(t, testNetPublish)
}

func testNetPublish(t *testing.T, tier string) {
	hp, refusedPort := freePort(t), freePort(t)
	done := publishedRun(t, tierNetArgs(t, tier, "-P", fmt.Sprintf("%d:8080", hp), "--publish", fmt.Sprintf("127.0.0.1:%d:8081", refusedPort),
		"--", "/opt/tests/inet", "serve", "0.0.0.0", "8080", "2")...)
	addr := fmt.Sprintf("127.0.0.1:%d", hp)
	payload := pattern(1 << 20)
	// The guest server listens once the guest is up: until then a
	// connection is reset (or refused before kbox listens). Each try is
	// one of the guest's connections only if it got through.
	exchange := func(data []byte) ([]byte, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		go func() {
			c.Write(data)
			c.(*net.TCPConn).CloseWrite()
		}()
		return io.ReadAll(c)
	}
	var got []byte
	var err error
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err = exchange(payload)
		if err == nil && len(got) > 0 || time.Now().After(deadline) {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("kbox ended before serving: status %s\nstdout: %s\nstderr: %s", r[2], r[0], r[1])
		case <-time.After(200 * time.Millisecond):
		}
	}
	want := append(append([]byte(nil), payload...), []byte(fmt.Sprintf("served %d bytes\n", len(payload)))...)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("published exchange: %v, got %d bytes (equal %v), want %d", err, len(got), bytes.Equal(got, want), len(want))
	}
	// The guest's port 8081 has no listener: kbox accepts on the host,
	// the guest resets the stack's dial, and the host connection is reset.
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", refusedPort)); err == nil {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("published port without a guest listener: %v, want a connection reset", err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("published port without a guest listener: dial %v", err)
	}
	// The second connection: a small one, then the guest exits.
	if got, err := exchange([]byte("ping")); err != nil || string(got) != "pingserved 4 bytes\n" {
		t.Errorf("second exchange: %q, %v", got, err)
	}
	r := <-done
	if r[2] != "0" || !strings.Contains(r[0], "connection 0 from 10.0.2.2: 1048576 bytes echoed") || !strings.Contains(r[0], "connection 1 from 10.0.2.2: 4 bytes echoed") {
		t.Errorf("status %s\nstdout: %s\nstderr: %s", r[2], r[0], r[1])
	}

	// UDP: datagrams from one host socket to the guest's port 5353 and
	// their answers back to it.
	up := freePort(t)
	done = publishedRun(t, tierNetArgs(t, tier, "-P", fmt.Sprintf("127.0.0.1:%d:5353/udp", up), "--", "/opt/tests/inet", "userve", "0.0.0.0", "5353", "2")...)
	uc, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", up))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	for i, msg := range []string{"first", "second"} {
		var reply string
		for deadline := time.Now().Add(60 * time.Second); reply == "" && time.Now().Before(deadline); {
			uc.Write([]byte(msg))
			uc.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 64)
			if m, err := uc.Read(buf); err == nil {
				reply = string(buf[:m])
			}
			if i > 0 {
				break // the guest is up: one try
			}
		}
		if reply != "re:"+msg {
			t.Errorf("udp %s: reply %q", msg, reply)
		}
	}
	r = <-done
	if r[2] != "0" || !strings.Contains(r[0], "datagram 0 from 10.0.2.2: 'first'") || !strings.Contains(r[0], "datagram 1 from 10.0.2.2: 'second'") {
		t.Errorf("udp: status %s\nstdout: %s\nstderr: %s", r[2], r[0], r[1])
	}
}

// TestNetObservatory: /api/snapshot's network counters come from LKL's
// /proc/net/dev and /proc/net/snmp and grow with a real transfer (at
// least the bytes sent each way), and the trace's connect and accept
// events carry the peer's address.
func TestNetObservatory(t *testing.T) {
	port := echoServer(t)
	p := strconv.Itoa(port)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	o := startObserved(t, "image", "-S", imagePath(t), "--read-only", "--net", "--net-allow", "127.0.0.1:"+p, "--web=0", "--trace-file", trace, "--",
		"/bin/sh", "-c", "sleep 3; /opt/tests/inet parallel 10.0.2.2 "+p+" 2; /opt/tests/inet server 127.0.0.1 0; sleep 4")
	type netSnap struct {
		Net struct {
			Available  bool `json:"available"`
			Interfaces map[string]struct {
				RxBytes uint64 `json:"rx_bytes"`
				TxBytes uint64 `json:"tx_bytes"`
			} `json:"interfaces"`
			TCP map[string]uint64 `json:"tcp"`
		} `json:"net"`
	}
	var before netSnap
	getJSON(t, o.base+"/api/snapshot", &before)
	if !before.Net.Available || before.Net.Interfaces["eth0"].TxBytes > 100000 {
		t.Fatalf("snapshot before the transfer: %+v", before.Net)
	}
	// inet parallel: 2 connections, each sends 200000 bytes and reads
	// the echo.
	const sent = 2 * 200000
	var after netSnap
	for deadline := time.Now().Add(30 * time.Second); ; {
		getJSON(t, o.base+"/api/snapshot", &after)
		e, b := after.Net.Interfaces["eth0"], before.Net.Interfaces["eth0"]
		if e.TxBytes-b.TxBytes >= sent && e.RxBytes-b.RxBytes >= sent && after.Net.TCP["ActiveOpens"] >= before.Net.TCP["ActiveOpens"]+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("eth0 did not grow by %d bytes each way with 2 active opens:\nbefore %+v\nafter %+v", sent, before.Net, after.Net)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if st := o.wait(t, 60*time.Second); st != 0 {
		t.Fatalf("status %d\n%s", st, o.stderr)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var connects, accepts int
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(line, `"name":"connect"`) && strings.Contains(line, `"peer":"10.0.2.2:`+p+`"`):
			connects++
		case strings.Contains(line, `"name":"accept4"`) && strings.Contains(line, `"peer":"127.0.0.1:`):
			accepts++
		}
	}
	if connects != 2 || accepts != 1 {
		t.Errorf("trace has %d connects to 10.0.2.2:%s with the peer (want 2) and %d accept4 with a 127.0.0.1 peer (want 1)", connects, p, accepts)
	}
}

// TestNetSocketBound: the guest's internet sockets are bounded (--net's
// 128 MiB kernel: 2048 at once). Five processes each open up to 1000
// UDP sockets, starting together: they share the bound and get ENFILE,
// as on a system whose file table is full, and kbox stays whole. (A CI
// rehearsal once had the first child open 1019 before the others
// began, and stop at its fd limit: hence the start barrier and the
// 1000.) Before the bound, five processes reached their own fd limits (about 5000
// sockets), LKL could no longer make kernel tasks, the last echo failed,
// and kbox lost the guest's files at exit (status 125). Then the
// sockets are free again, the network still works, and a file written
// after it all is in the image.
func TestNetSocketBound(t *testing.T) {
	p := strconv.Itoa(echoServer(t))
	img := copyImage(t, imagePath(t))
	// inetmany forks the five itself.
	// 1000 each: under the guest's usual 1024 fds, and 5000 in all.
	script := "/opt/tests/inetmany 10.0.2.2 " + p + " 1000 5 && echo bounded > /root/bound.txt && sync"
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--net", "--net-allow", "127.0.0.1:"+p, "--", "/bin/sh", "-c", script)
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	// Each child stops at ENFILE (the bound) or, if the others were
	// slow, at its 1000; none closes one before all have stopped.
	enfile := regexp.MustCompile(`opened (\d+), then Too many open files in system`).FindAllStringSubmatch(stdout, -1)
	full := regexp.MustCompile(`(?m)^opened (1000)$`).FindAllStringSubmatch(stdout, -1)
	if len(enfile) == 0 || len(enfile)+len(full) != 5 {
		t.Fatalf("want 5 processes stopped by ENFILE or at 1000, at least one by ENFILE:\n%s\nstderr: %s", stdout, stderr)
	}
	sum := 0
	for _, m := range append(enfile, full...) {
		n, _ := strconv.Atoi(m[1])
		sum += n
	}
	// All stopped opening before any closed: the sum is what was open
	// at once (give or take the reaper's lag at the bound).
	if sum > 2048+5 || sum < 2048-5 {
		t.Errorf("%d sockets open at once, want 2048 (the bound):\n%s", sum, stdout)
	}
	if !strings.Contains(stdout, "opened 10\necho ok") {
		t.Errorf("after the bound, 10 sockets and an echo:\n%s", stdout)
	}
	if strings.Contains(stderr, "unavailable") || strings.Contains(stderr, "lost") {
		t.Errorf("kbox's own work failed:\n%s", stderr)
	}
	if got, ok := debugfsCat(t, img, "/root/bound.txt"); !ok || got != "bounded\n" {
		t.Errorf("/root/bound.txt in the image: %q %v", got, ok)
	}
	assertCleanImage(t, img)
}

// TestNetPreforkServer: one guest TCP listener shared by three forked
// worker processes, each blocked in accept on it (a pre-forking server,
// as Apache's or gunicorn's), reached from the host through -P: 40
// connections one after another and 40 at once, each answered whole by
// one worker, then "quit" ends the server. Forks: the seccomp tier.
func TestNetPreforkServer(t *testing.T) {
	hp := freePort(t)
	done := publishedRun(t, "image", "-S", imagePath(t), "--read-only", "--syscall-mode=seccomp", "--net",
		"-P", fmt.Sprintf("%d:8080", hp), "--", "/opt/tests/inetmany", "prefork", "8080", "3")
	addr := fmt.Sprintf("127.0.0.1:%d", hp)
	exchange := func(msg string) (string, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	// Until the guest listens, a connection is reset or refused.
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := exchange("hello")
		if err == nil && strings.HasSuffix(got, ":hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest server never answered: %q, %v", got, err)
		}
		select {
		case r := <-done:
			t.Fatalf("kbox ended before serving: status %s\nstdout: %s\nstderr: %s", r[2], r[0], r[1])
		case <-time.After(200 * time.Millisecond):
		}
	}
	workers := map[string]int{}
	check := func(i int, got string, err error) string {
		msg := fmt.Sprintf("m%d", i)
		w, rest, _ := strings.Cut(got, ":")
		if err != nil || rest != msg || len(w) != 2 || w[0] != 'w' {
			t.Errorf("connection %d: %q, %v", i, got, err)
			return ""
		}
		return w
	}
	for i := 0; i < 40; i++ {
		got, err := exchange(fmt.Sprintf("m%d", i))
		if w := check(i, got, err); w != "" {
			workers[w]++
		}
	}
	type answer struct {
		got string
		err error
	}
	answers := make([]answer, 40)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got, err := exchange(fmt.Sprintf("m%d", 100+i))
			answers[i] = answer{got, err}
		}(i)
	}
	wg.Wait()
	for i, a := range answers {
		if w := check(100+i, a.got, a.err); w != "" {
			workers[w]++
		}
	}
	t.Logf("connections per worker: %v", workers)
	if got, err := exchange("quit"); err != nil || !strings.HasSuffix(got, ":quit") {
		t.Errorf("quit: %q, %v", got, err)
	}
	select {
	case r := <-done:
		if r[2] != "0" || r[0] != "workers done\n" {
			t.Errorf("status %s\nstdout: %s\nstderr: %s", r[2], r[0], r[1])
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the server did not end after quit")
	}
}

// TestNetRebind: a port is free again as soon as the socket that held it
// is closed, as on Linux: a socket bound to port 0, closed, then another
// bound to its port at once (how test frameworks find a free port), and a
// listener closed and its port listened on again at once (a server
// restarting, with SO_REUSEADDR), 200 times each, in each tier, on the
// guest's loopback. kbox ends an LKL socket after the guest's close, on
// its reaper, and LKL frees the port from a workqueue after that: the
// bind got EADDRINUSE (Python's test_socket failed so).
func TestNetRebind(t *testing.T) {
	img := imagePath(t)
	forEachTier(t, func(t *testing.T, tier string) {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "/opt/tests/inet", "rebind", "127.0.0.1", "0", "200")
		if status != 0 || stdout != "rebind ok 400\n" {
			t.Errorf("status %d, stdout %q\nstderr: %s", status, stdout, lastLines(stderr, 5))
		}
	})
}

// TestNetLocalConnectWritable: a non-blocking connect to the guest's own
// listener, the accept, then one epoll of both ends: Linux reports both
// writable (Python's test_epoll does this). kbox ends such a connect on
// a goroutine a little after LKL's handshake, and the client's end turned
// writable late: the old binary had both in 3 to 34 of 100 rounds. The
// accept now waits (at most 20 ms) for its local peer's connect to end.
// Data sent on the loopback still arrives through kbox's pumps, a little
// after the send returns (docs/networking.md, "A local peer's connect").
func TestNetLocalConnectWritable(t *testing.T) {
	img := packageImage(t, "python3")
	script := `
import socket, select
ok = 0
for i in range(100):
    srv = socket.create_server(("127.0.0.1", 0))
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", srv.getsockname()[1]))
    except BlockingIOError: pass
    s, _ = srv.accept()
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)
    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)
    if sorted(ep.poll(1, 4)) == sorted([(c.fileno(), select.EPOLLOUT), (s.fileno(), select.EPOLLOUT)]): ok += 1
    ep.close(); c.close(); s.close(); srv.close()
print(ok)
`
	forEachTier(t, func(t *testing.T, tier string) {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "python3", "-c", script)
		n, err := strconv.Atoi(strings.TrimSpace(stdout))
		// Bounded waits on a loaded machine: nearly every round, where
		// the old binary had a third at best.
		if status != 0 || err != nil || n < 90 {
			t.Errorf("status %d: both ends writable in %q of 100 rounds (want at least 90)\nstderr: %s", status, stdout, lastLines(stderr, 5))
		}
	})
}
