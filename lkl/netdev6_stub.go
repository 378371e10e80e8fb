//go:build !lkl

package lkl

import "net/netip"

// ConfigureIPv6 fails without LKL.
func (d *NetDev) ConfigureIPv6(addr netip.Addr, plen int, gw netip.Addr, procDir int) error {
	return ErrNotBuilt
}
