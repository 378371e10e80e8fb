package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kbox-project/kbox/inet"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/usernet"
)

// netMemMB is the kernel's memory (a mem= in -k wins): enough for the
// guest's sockets, with --net or on its loopback alone.
const netMemMB = 128

// guestNet is the guest's network: with --net, LKL's device, the
// user-mode stack behind it and the engine's internet sockets; without,
// the internet sockets on LKL's loopback alone (dev and net nil).
type guestNet struct {
	dev  *lkl.NetDev
	net  *usernet.Network
	inet *inet.Net
	log  bool // decisions and counters on stderr

	// The stack's decisions go to these (the observatory, the audit
	// log), added before or while the network runs.
	mu    sync.RWMutex
	sinks []func(usernet.Event)
}

// subscribe has f told of every decision of the stack from now on.
func (g *guestNet) subscribe(f func(usernet.Event)) {
	if g == nil || f == nil {
		return
	}
	g.mu.Lock()
	g.sinks = append(g.sinks, f)
	g.mu.Unlock()
}

// decided passes a decision on to the sinks and, with --verbose or
// KBOX_NET_LOG=1, prints it.
func (g *guestNet) decided(ev usernet.Event) {
	g.mu.RLock()
	for _, f := range g.sinks {
		f(ev)
	}
	g.mu.RUnlock()
	if !g.log {
		return
	}
	verdict := "refused"
	if ev.Allowed {
		verdict = "allowed"
	}
	if ev.Inbound {
		fmt.Fprintf(os.Stderr, "kbox: net: %s %s -> published %s: %s, %s\n", ev.Proto, ev.Real, ev.Dest, verdict, ev.Why)
		return
	}
	fmt.Fprintf(os.Stderr, "kbox: net: %s %s -> %s (%s): %s, %s\n", ev.Proto, ev.Guest, ev.Dest, ev.Real, verdict, ev.Why)
}

// addNetDev adds the device with --net; before boot. Without --net the
// guest has a network all the same, its kernel's loopback and no device:
// nothing it does with it leaves LKL.
func addNetDev(o *ImageOptions) (*guestNet, error) {
	if !o.Net {
		if len(o.NetAllow) > 0 || len(o.NetAllowHost) > 0 || o.NetDenyAll || o.DNS != "" || len(o.Publish) > 0 {
			return nil, usagef("--net-allow, --net-allow-host, --net-deny-all, --dns and --publish need --net")
		}
		return &guestNet{}, nil
	}
	d, err := lkl.AddNetDev(usernet.GuestMAC)
	if err != nil {
		return nil, err
	}
	return &guestNet{dev: d}, nil
}

// start configures the guest's interfaces and starts the stack; after
// boot. procDir is an LKL fd of the kernel's own proc, -1 if none.
func (g *guestNet) start(o *ImageOptions, procDir int) error {
	if g == nil {
		return nil
	}
	if g.dev == nil {
		if err := g.startLoopback(o, procDir); err != nil {
			// The guest runs as before there was a loopback:
			// its internet sockets are EAFNOSUPPORT.
			fmt.Fprintf(os.Stderr, "kbox: warning: no loopback network: %v\n", err)
			g.inet = nil
		}
		return nil
	}
	if err := g.dev.Configure(usernet.GuestAddr, usernet.PrefixLen, usernet.GatewayIP); err != nil {
		return err
	}
	if err := g.dev.SetMTU(usernet.MTU); err != nil {
		return err
	}
	if err := lkl.TuneTCP(procDir, kernelMemMB(rootOptions(o).Kernel)); err != nil {
		// Slower bulk sends, nothing else: say so and go on.
		fmt.Fprintf(os.Stderr, "kbox: warning: --net: %v\n", err)
	}
	if err := g.dev.ConfigureIPv6(usernet.GuestAddr6, usernet.PrefixLen6, usernet.GatewayIP6, procDir); err != nil {
		// IPv4 works without it: say so and go on.
		fmt.Fprintf(os.Stderr, "kbox: warning: --net: no IPv6 on eth0: %v\n", err)
	}
	dns := o.DNS
	if dns == "" {
		dns = hostResolver("/etc/resolv.conf")
	}
	if dns != "" {
		if _, _, err := net.SplitHostPort(dns); err != nil {
			dns = net.JoinHostPort(dns, "53")
		}
	}
	var err error
	if g.inet, err = inet.New(); err != nil {
		return err
	}
	g.inet.Max = inetMax(o)
	pol, hosts := egress(o)
	cfg := usernet.Config{
		Policy:      pol,
		DNS:         dns,
		AllowHosts:  hosts,
		Event:       g.decided,
		AfterFrames: g.inet.Sweep,
	}
	g.log = o.Verbose || os.Getenv("KBOX_NET_LOG") != ""
	n, err := usernet.New(g.dev, cfg)
	if err != nil {
		return err
	}
	g.net = n
	for _, p := range o.Publish {
		at, err := n.Publish(p)
		if err != nil {
			n.Close()
			return err
		}
		if g.log {
			fmt.Fprintf(os.Stderr, "kbox: net: publishing %s (%s) to the guest's port %d\n", p, at, p.GuestPort)
		}
	}
	return nil
}

// startLoopback gives the guest without --net its own loopback: lo up
// (127.0.0.1 and ::1), LKL's TCP tuned as with --net (and ping allowed),
// and its internet and netlink sockets served by LKL.
func (g *guestNet) startLoopback(o *ImageOptions, procDir int) error {
	if err := lkl.LoopbackUp(); err != nil {
		return err
	}
	if err := lkl.TuneTCP(procDir, kernelMemMB(rootOptions(o).Kernel)); err != nil {
		fmt.Fprintf(os.Stderr, "kbox: warning: loopback: %v\n", err)
	}
	var err error
	if g.inet, err = inet.New(); err != nil {
		return err
	}
	g.inet.Max = inetMax(o)
	return nil
}

func (g *guestNet) close() {
	if g == nil {
		return
	}
	if g.net == nil {
		// The loopback alone: nothing to carry out, but the sockets
		// being ended stop calling LKL before it halts.
		if g.inet != nil {
			g.inet.Stop(time.Second)
		}
		return
	}
	// What the guest wrote and closed last reaches the host first
	// (bounded: a flow whose guest end is still open is not waited for
	// beyond it).
	if g.inet != nil {
		g.inet.Drain(2 * time.Second)
		g.inet.Stop(time.Second)
	}
	if open := g.net.Quiesce(2 * time.Second); open > 0 && g.log {
		fmt.Fprintf(os.Stderr, "kbox: net: %d flows still open 2 s after the guest ended: cut\n", open)
	}
	g.dev.Hangup()
	g.net.Close()
	// A flow handler still finishing tells no one: the audit log and
	// the observatory close after this.
	g.mu.Lock()
	g.sinks = nil
	g.mu.Unlock()
	if g.log {
		all, byTick := g.inet.Swept()
		fmt.Fprintf(os.Stderr, "kbox: net: device %+v (direct delivery: %v), stack %+v, socket events %d (%d by the ticker)\n",
			g.dev.Stats(), g.dev.Direct(), g.net.Stats(), all, byTick)
	}
}

// hostResolver is the first nameserver of a resolv.conf, "" if none. A
// loopback resolver (systemd-resolved's 127.0.0.53) is reachable from
// kbox's process, which is where the responder's queries leave from.
func hostResolver(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "nameserver" {
			return fs[1]
		}
	}
	return ""
}

// inetPerMB is how many internet sockets the guest may hold open at once
// per MiB of the kernel's memory: each has its socket and buffers in LKL
// (no kernel task: docs/networking.md, "Limits: how many sockets"). 16
// per MiB is 2048 at --net's default 128 MiB, half of the ~4000 open UDP
// sockets at which LKL ran out of memory when each still had a task.
const inetPerMB = 16

// inetMax is the bound on the guest's open internet sockets
// (inet.Net.Max) for the kernel's memory.
func inetMax(o *ImageOptions) int {
	return kernelMemMB(rootOptions(o).Kernel) * inetPerMB
}

// kernelMemMB is the kernel's memory in MiB: the last mem= of the
// command line (as the kernel reads it), else MemMB, else LKL's default.
func kernelMemMB(k lkl.Config) int {
	mb := k.MemMB
	if mb <= 0 {
		mb = lkl.DefaultMemMB
	}
	for _, w := range strings.Fields(k.Cmdline) {
		if v, ok := strings.CutPrefix(w, "mem="); ok {
			if n, err := ParseSize(v); err == nil && n>>20 > 0 {
				mb = int(n >> 20)
			}
		}
	}
	return mb
}
