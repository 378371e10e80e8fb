package main

import (
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

// reservedRoutes are the guest's system directories, where no bind may go:
// /proc (a host route), /sys (LKL's sysfs with the host's CPU topology)
// and /dev (LKL's ramfs with kbox's devices and private devpts).
var reservedRoutes = []string{"/proc", "/sys", "/dev"}

// hostRoutes are the guest paths served from the host: its /proc and, when
// the guest has a sysfs, its CPU topology (read-only).
func hostRoutes(root *rootfs.Root) []string {
	routes := []string{"/proc"}
	if root.Mounted("/sys") {
		routes = append(routes, guestpath.CPURoute)
	}
	return routes
}

// openBinds checks the -b binds and opens their host directories. A bad
// guest path is a usage error (exit 2); a missing or non-directory host
// path a setup error (exit 125).
func openBinds(o *ImageOptions) ([]*guestpath.Bind, error) {
	var guests []string
	for _, b := range o.Binds {
		guests = append(guests, b.Dst)
	}
	if err := guestpath.CheckBindGuests(guests, reservedRoutes); err != nil {
		return nil, usagef("%v", err)
	}
	var out []*guestpath.Bind
	for _, b := range o.Binds {
		ob, err := guestpath.OpenBind(b.Src, b.Dst, b.ReadOnly)
		if err != nil {
			closeBinds(out)
			return nil, err
		}
		out = append(out, ob)
	}
	return out, nil
}

func closeBinds(binds []*guestpath.Bind) {
	for _, b := range binds {
		unix.Close(b.Root)
	}
}
