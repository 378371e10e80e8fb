//go:build lkl

package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"github.com/kbox-project/kbox/usernet"
)

// The mechanism's floor: what --net's machinery costs with no guest, no
// interception and no host pair. The helper "net-mechanism" boots LKL with
// kbox's device and command line, starts the user-mode stack as kbox does
// (cmd/kbox/net.go) and runs inet's conns and rtt workloads on LKL's
// sockets directly, from one Go thread through lkl.Syscall6, to the
// host's echo server through 10.0.2.2. So its figures are LKL's TCP, the
// device, gVisor's stack, the host dial and the splice: the part of a
// kbox connection or round trip that no change to the serving path
// (notifications, the pair, the pumps) can remove.
func init() { helpers["net-mechanism"] = netMechanism }

func netMechanism(img string, ro bool) error {
	port, err := strconv.Atoi(os.Getenv("KBOX_FLOOR_PORT"))
	if err != nil {
		return fmt.Errorf("KBOX_FLOOR_PORT: %v", err)
	}
	conns, _ := strconv.Atoi(os.Getenv("KBOX_FLOOR_CONNS"))
	rounds, _ := strconv.Atoi(os.Getenv("KBOX_FLOOR_ROUNDS"))
	dev, err := lkl.AddNetDev(usernet.GuestMAC)
	if err != nil {
		return err
	}
	return withRoot(img, true, func(r *rootfs.Root) error {
		if err := dev.Configure(usernet.GuestAddr, usernet.PrefixLen, usernet.GatewayIP); err != nil {
			return err
		}
		if err := dev.SetMTU(usernet.MTU); err != nil {
			return err
		}
		procDir, ok := r.KernelProc()
		if !ok {
			procDir = -1
		}
		if err := lkl.TuneTCP(procDir, 128); err != nil {
			return err
		}
		rule, err := usernet.ParseRule("127.0.0.1:" + strconv.Itoa(port))
		if err != nil {
			return err
		}
		n, err := usernet.New(dev, usernet.Config{Policy: usernet.Policy{Allow: []usernet.Rule{rule}}})
		if err != nil {
			return err
		}
		defer func() { dev.Hangup(); n.Close() }()

		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		dst := [4]byte(usernet.GatewayIP.As4())
		buf := make([]byte, 64)
		// Warm-up: the first LKL call on a thread sets up its task.
		for i := 0; i < 10; i++ {
			if err := floorConn(dst, port, buf); err != nil {
				return err
			}
		}
		t0 := time.Now()
		for i := 0; i < conns; i++ {
			if err := floorConn(dst, port, buf); err != nil {
				return err
			}
		}
		fmt.Printf("conns=%.1f\n", float64(conns)/time.Since(t0).Seconds())

		fd, err := floorDial(dst, port)
		if err != nil {
			return err
		}
		defer lkl.Close(fd)
		for i := 0; i < 100+rounds; i++ {
			if i == 100 {
				t0 = time.Now()
			}
			if err := floorEcho(fd, buf); err != nil {
				return err
			}
		}
		fmt.Printf("rtt=%.1f\n", float64(time.Since(t0).Microseconds())/float64(rounds))
		return nil
	})
}

// floorConn is inet conns' connection on an LKL socket: connect, one
// byte echoed, close.
func floorConn(dst [4]byte, port int, buf []byte) error {
	fd, err := floorDial(dst, port)
	if err != nil {
		return err
	}
	err = floorEcho(fd, buf[:1])
	lkl.Close(fd)
	return err
}

// floorEcho writes buf on LKL's fd and reads as much back.
func floorEcho(fd int, buf []byte) error {
	if n, err := lkl.Write(fd, buf); err != nil || n != len(buf) {
		return fmt.Errorf("write: %d %v", n, err)
	}
	for got := 0; got < len(buf); {
		n, err := lkl.Read(fd, buf[got:])
		if err != nil || n == 0 {
			return fmt.Errorf("read: %d %v", n, err)
		}
		got += n
	}
	return nil
}

// BenchmarkNetMechanism: the floors of BenchmarkNet's net_conns and
// net_rtt rows, in the same minutes as the native figures (median of 3
// each): LKL's own TCP over its loopback between two C threads
// (scripts/lkl_net_floor.c, needs cc and liblkl through CGO_CFLAGS and
// CGO_LDFLAGS, as make sets them), and the whole mechanism kbox's network
// is made of without the guest (the helper above). docs/benchmarks.md,
// "The floor of a connection".
func BenchmarkNetMechanism(b *testing.B) {
	img := imagePath(b)
	inet := dumpFromImage(b, img, "/opt/tests/inet")
	echo := echoServerB(b)
	p := strconv.Itoa(echo)
	cfloor := buildLKLNetFloor(b)
	var natConns, natRTT, mechConns, mechRTT, lklConns, lklRTT []float64
	for i := 0; i < 3; i++ {
		for _, m := range []struct {
			mode, n string
			into    *[]float64
		}{{"conns", "500", &natConns}, {"rtt", "2000", &natRTT}} {
			out, err := exec.Command(inet, m.mode, "127.0.0.1", p, m.n).Output()
			if err != nil {
				b.Fatalf("native %s: %v %s", m.mode, err, out)
			}
			*m.into = append(*m.into, inetFigure(b, m.mode, string(out)))
		}
		kv := helper(b, "net-mechanism", img, true, "KBOX_FLOOR_PORT="+p, "KBOX_FLOOR_CONNS=500", "KBOX_FLOOR_ROUNDS=2000", "KBOX_TEST_CMDLINE=mem=128M")
		c, _ := strconv.ParseFloat(kv["conns"], 64)
		r, _ := strconv.ParseFloat(kv["rtt"], 64)
		mechConns, mechRTT = append(mechConns, c), append(mechRTT, r)
		if cfloor != "" {
			out, err := exec.Command(cfloor, "500", "2000").Output()
			if err != nil {
				b.Fatalf("lkl_net_floor: %v %s", err, out)
			}
			for _, l := range strings.Split(string(out), "\n") {
				f := strings.Fields(l)
				if len(f) >= 3 && f[0] == "lkl" {
					v, _ := strconv.ParseFloat(f[2], 64)
					if f[1] == "conns" {
						lklConns = append(lklConns, v)
					} else {
						lklRTT = append(lklRTT, v)
					}
				}
			}
		}
	}
	nc, nr := median(natConns), median(natRTT)
	b.Logf("native (inet, host loopback)          conns %7.1f /s          rtt %6.1f us", nc, nr)
	b.Logf("mechanism (LKL+device+gVisor+host)     conns %7.1f /s (%4.1f%%)  rtt %6.1f us (%.1fx)", median(mechConns), 100*median(mechConns)/nc, median(mechRTT), median(mechRTT)/nr)
	b.ReportMetric(median(mechConns)/nc, "mechanism_conns_ratio")
	b.ReportMetric(median(mechRTT)/nr, "mechanism_rtt_ratio")
	if len(lklConns) > 0 {
		b.Logf("LKL alone (both ends, its loopback)    conns %7.1f /s (%4.1f%%)  rtt %6.1f us (%.1fx)", median(lklConns), 100*median(lklConns)/nc, median(lklRTT), median(lklRTT)/nr)
		b.ReportMetric(median(lklConns)/nc, "lkl_conns_ratio")
		b.ReportMetric(median(lklRTT)/nr, "lkl_rtt_ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// buildLKLNetFloor builds scripts/lkl_net_floor.c against the liblkl kbox
// links, "" (and says why) when it cannot.
func buildLKLNetFloor(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "lkl_net_floor")
	args := append(strings.Fields(os.Getenv("CGO_CFLAGS")), "-o", bin, filepath.Join(repoRoot(), "scripts", "lkl_net_floor.c"))
	args = append(args, strings.Fields(os.Getenv("CGO_LDFLAGS"))...)
	args = append(args, "-l:liblkl.a", "-lpthread", "-lrt")
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		b.Logf("*** lkl_net_floor not built (%v; CGO_CFLAGS/CGO_LDFLAGS name liblkl under make): %s", err, lastLines(string(out), 3))
		return ""
	}
	return bin
}
