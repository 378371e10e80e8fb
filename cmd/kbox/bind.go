package main

import (
	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// hostRoutes are the guest paths served from the host's own /proc, /sys
// and /dev.
var hostRoutes = []string{"/proc", "/sys", "/dev"}

// openBinds checks the -b binds and opens their host directories. A bad
// guest path is a usage error (exit 2); a missing or non-directory host
// path a setup error (exit 125).
func openBinds(o *ImageOptions) ([]*dispatch.Bind, error) {
	var guests []string
	for _, b := range o.Binds {
		guests = append(guests, b.Dst)
	}
	if err := dispatch.CheckBindGuests(guests, hostRoutes); err != nil {
		return nil, usagef("%v", err)
	}
	var out []*dispatch.Bind
	for _, b := range o.Binds {
		ob, err := dispatch.OpenBind(b.Src, b.Dst, b.ReadOnly)
		if err != nil {
			closeBinds(out)
			return nil, err
		}
		out = append(out, ob)
	}
	return out, nil
}

func closeBinds(binds []*dispatch.Bind) {
	for _, b := range binds {
		unix.Close(b.Root)
	}
}
