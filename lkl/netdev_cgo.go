//go:build lkl

package lkl

/*
#include <stdlib.h>
#include "lkl_glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NetDev is kbox's network device in LKL (netdev.c): frames LKL sends are
// read with Read, frames for LKL are queued with Write. Its rings live in
// C memory; no host fd carries a frame.
type NetDev struct {
	dev unsafe.Pointer
	id  int
	wmu sync.Mutex // one producer of the rx ring
	// ev is the eventfd the tx ring's producer writes when Read waits
	// (in Go's netpoller: no thread blocked in a cgo call).
	ev  *os.File
	evb [8]byte
}

// AddNetDev adds the device, with MAC address mac, before Boot.
func AddNetDev(mac [6]byte) (*NetDev, error) {
	bootMu.Lock()
	defer bootMu.Unlock()
	if booted || halted {
		return nil, errors.New("lkl: a network device must be added before boot")
	}
	d := C.kbox_netdev_new()
	if d == nil {
		return nil, unix.ENOMEM
	}
	cmac := (*C.uchar)(C.CBytes(mac[:]))
	defer C.free(unsafe.Pointer(cmac))
	id := int(C.kbox_netdev_add(d, cmac))
	if id < 0 {
		return nil, fmt.Errorf("lkl: lkl_netdev_add: %w", unix.Errno(-id))
	}
	ev := os.NewFile(uintptr(C.kbox_netdev_efd(d)), "kbox-netdev")
	return &NetDev{dev: d, id: id, ev: ev}, nil
}

// Read copies the next frame LKL sent into b, waiting up to timeoutMs
// (0: not at all) for LKL to send or to have taken frames on its poll
// thread; it returns 0 when there is no frame (a timeout, or the poll
// thread's wake-up) and -1 once the device is hung up. Call it from one
// goroutine. It waits in Go's netpoller on the device's eventfd, so a
// waiting Read holds no OS thread in a cgo call.
func (d *NetDev) Read(b []byte, timeoutMs int) int {
	n := int(C.kbox_netdev_tryread(d.dev, (*C.uchar)(&b[0]), C.int(len(b))))
	if n != 0 || timeoutMs <= 0 {
		return n
	}
	d.ev.SetReadDeadline(time.Now().Add(time.Duration(timeoutMs) * time.Millisecond))
	if _, err := d.ev.Read(d.evb[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return -1
	}
	return int(C.kbox_netdev_tryread(d.dev, (*C.uchar)(&b[0]), C.int(len(b))))
}

// Write queues frame b for LKL; false when the queue is full (dropped).
func (d *NetDev) Write(b []byte) bool {
	d.wmu.Lock()
	n := C.kbox_netdev_write(d.dev, (*C.uchar)(&b[0]), C.int(len(b)))
	d.wmu.Unlock()
	return n >= 0
}

// netGen is netdev.c's count of frames handed to LKL's driver.
var netGen = (*atomic.Uint64)(unsafe.Pointer(C.kbox_net_gen_ptr()))

// Deliveries counts the frames handed to LKL's driver so far, by kbox's
// writer (counted before each is delivered) or by LKL's poll thread.
func Deliveries() uint64 { return netGen.Load() }

// Direct reports whether frames for LKL are delivered on the writer's
// thread (netdev.c, "Direct delivery"), not by waking LKL's poll thread:
// liblkl has the symbols for it.
func (d *NetDev) Direct() bool { return C.kbox_netdev_direct(d.dev) != 0 }

// Hangup stops LKL's poll thread and wakes Read.
func (d *NetDev) Hangup() { C.kbox_netdev_hup(d.dev) }

// NetDevStats are the device's frame counters.
type NetDevStats struct{ TxFrames, TxDrops, RxFrames, RxDrops uint64 }

// Stats returns the device's counters (tx: LKL to kbox).
func (d *NetDev) Stats() NetDevStats {
	var out [4]C.ulonglong
	C.kbox_netdev_stats(d.dev, &out[0])
	return NetDevStats{uint64(out[0]), uint64(out[1]), uint64(out[2]), uint64(out[3])}
}

// SetMTU sets the device's MTU, after Configure. Frames up to
// MaxFrame bytes (an MTU of MaxFrame-14) cross the device.
func (d *NetDev) SetMTU(mtu int) error {
	var err error
	AsRoot(func() {
		ifx := int(C.kbox_netdev_ifindex(C.int(d.id)))
		if ifx < 0 {
			err = fmt.Errorf("lkl: ifindex: %w", unix.Errno(-ifx))
			return
		}
		if r := C.kbox_net_if_set_mtu(C.int(ifx), C.int(mtu)); r < 0 {
			err = fmt.Errorf("lkl: set MTU %d: %w", mtu, unix.Errno(-r))
		}
	})
	return err
}

// LoopbackUp brings LKL's lo up, after boot: the guest's network without
// --net, 127.0.0.1 and ::1 and nothing else.
func LoopbackUp() error {
	var err error
	AsRoot(func() {
		if r := C.kbox_net_if_up(1); r < 0 {
			err = fmt.Errorf("lkl: lo up: %w", unix.Errno(-r))
		}
	})
	return err
}

// Configure brings lo and the device up, after boot: address addr/plen
// and default gateway gw (IPv4).
func (d *NetDev) Configure(addr netip.Addr, plen int, gw netip.Addr) error {
	if err := LoopbackUp(); err != nil {
		return err
	}
	var err error
	AsRoot(func() {
		ifx := int(C.kbox_netdev_ifindex(C.int(d.id)))
		if ifx < 0 {
			err = fmt.Errorf("lkl: ifindex: %w", unix.Errno(-ifx))
			return
		}
		if r := C.kbox_net_if_up(C.int(ifx)); r < 0 {
			err = fmt.Errorf("lkl: eth up: %w", unix.Errno(-r))
			return
		}
		if r := C.kbox_net_if_set_ipv4(C.int(ifx), C.uint(inAddr(addr)), C.uint(plen)); r < 0 {
			err = fmt.Errorf("lkl: set address: %w", unix.Errno(-r))
			return
		}
		if r := C.kbox_net_set_ipv4_gateway(C.uint(inAddr(gw))); r < 0 {
			err = fmt.Errorf("lkl: set gateway: %w", unix.Errno(-r))
		}
	})
	return err
}
