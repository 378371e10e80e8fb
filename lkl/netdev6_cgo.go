//go:build lkl

package lkl

/*
#include <stdlib.h>
int kbox_netdev_ifindex(int id);
int kbox_net_if_set_ipv6(int ifindex, void *addr, unsigned int plen);
int kbox_net_set_ipv6_gateway(void *addr);
*/
import "C"

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ConfigureIPv6 gives the device (up, after Configure) the IPv6 address
// addr/plen and a default route via gw. procDir is an LKL fd of the
// kernel's own proc: duplicate address detection is turned off on the
// device first (dad_transmits 0), so the address is usable at once
// rather than tentative for a second (the link has no other node).
func (d *NetDev) ConfigureIPv6(addr netip.Addr, plen int, gw netip.Addr, procDir int) error {
	if !addr.Is6() || !gw.Is6() {
		return fmt.Errorf("lkl: IPv6 configuration with %s via %s", addr, gw)
	}
	var err error
	AsRoot(func() {
		ifx := int(C.kbox_netdev_ifindex(C.int(d.id)))
		if ifx < 0 {
			err = fmt.Errorf("lkl: ifindex: %w", unix.Errno(-ifx))
			return
		}
		for _, name := range []string{"accept_dad", "dad_transmits"} {
			if procDir < 0 {
				break // no proc: the address is tentative for a while
			}
			if werr := writeAt(procDir, fmt.Sprintf("sys/net/ipv6/conf/%s/%s", netDevName, name), "0\n"); werr != nil {
				err = fmt.Errorf("lkl: IPv6 %s: %w", name, werr)
				return
			}
		}
		a, g := addr.As16(), gw.As16()
		ca := C.CBytes(a[:])
		defer C.free(ca)
		cg := C.CBytes(g[:])
		defer C.free(cg)
		if r := C.kbox_net_if_set_ipv6(C.int(ifx), ca, C.uint(plen)); r < 0 {
			err = fmt.Errorf("lkl: set IPv6 address: %w", unix.Errno(-r))
			return
		}
		if r := C.kbox_net_set_ipv6_gateway(cg); r < 0 {
			err = fmt.Errorf("lkl: set IPv6 gateway: %w", unix.Errno(-r))
		}
	})
	return err
}

// netDevName is the kernel's name of kbox's device: LKL names its
// virtio-net devices eth0, eth1, ... in the order they are added, and
// kbox adds one.
const netDevName = "eth0"

// writeAt writes s to the file path relative to LKL fd dir.
func writeAt(dir int, path, s string) error {
	fd, err := Openat(dir, path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer Close(fd)
	_, err = Write(fd, []byte(s))
	return err
}
