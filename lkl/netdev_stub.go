//go:build !lkl

package lkl

import "net/netip"

// NetDev is kbox's network device in LKL; without LKL it cannot exist.
type NetDev struct{}

// NetDevStats are the device's frame counters.
type NetDevStats struct{ TxFrames, TxDrops, RxFrames, RxDrops uint64 }

// Deliveries is 0: no frame reaches LKL without it.
func Deliveries() uint64 { return 0 }

// LoopbackUp fails without LKL.
func LoopbackUp() error { return ErrNotBuilt }

// AddNetDev fails without LKL.
func AddNetDev(mac [6]byte) (*NetDev, error) { return nil, ErrNotBuilt }

func (d *NetDev) Read(b []byte, timeoutMs int) int                         { return -1 }
func (d *NetDev) Write(b []byte) bool                                      { return false }
func (d *NetDev) Hangup()                                                  {}
func (d *NetDev) Direct() bool                                             { return false }
func (d *NetDev) Stats() NetDevStats                                       { return NetDevStats{} }
func (d *NetDev) SetMTU(mtu int) error                                     { return ErrNotBuilt }
func (d *NetDev) Configure(addr netip.Addr, plen int, gw netip.Addr) error { return ErrNotBuilt }
