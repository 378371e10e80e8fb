package rewrite

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Where pools come from. A pool is a memfd mapped twice: read-execute at
// the address the code runs at, and read-write anywhere for kbox to write
// stubs and veneers through (never a writable and executable mapping).
// Stubs need no particular address; a site reaches its stub directly when
// a pool lies within B reach (±128 MiB) of the text, through a veneer in
// a near pool otherwise. Arm64MapPoolNear asks for such a pool with
// MAP_FIXED_NOREPLACE at hints just below and just above the text, moving
// away a MiB at a time while the pool stays in reach; a kernel older than
// 4.17 takes the flag as a plain hint, so an answer at another address is
// unmapped and the next hint tried. When none is free, the text's sites
// have no near pool and keep trapping.

const arm64PageSize = 1 << 16 // the largest arm64 page; a multiple of 4 KiB

// Arm64MappedPool is a pool with its mappings; Close unmaps them.
type Arm64MappedPool struct {
	*Arm64Pool
	fd int
	rw []byte
}

// Arm64MapPool maps a pool of size bytes wherever the kernel puts it (for
// stubs reached through veneers).
func Arm64MapPool(size uint64) (*Arm64MappedPool, error) {
	return arm64MapPool(size, []uint64{0})
}

// Arm64MapPoolNear maps a pool of size bytes in B reach of the text
// [lo, hi): every site in it can branch to every slot of the pool and
// back. It fails when the text is too large for one pool to reach all of
// it, or no address in reach is free.
func Arm64MapPoolNear(lo, hi, size uint64) (*Arm64MappedPool, error) {
	size = (size + arm64PageSize - 1) &^ (arm64PageSize - 1)
	if size == 0 || hi <= lo || lo%4 != 0 {
		return nil, fmt.Errorf("rewrite/arm64: no pool of %d bytes near [%#x, %#x)", size, lo, hi)
	}
	// All of [hint, hint+size) within reach of all of [lo, hi), both ways.
	const margin = arm64PageSize
	if hi-lo+size+2*margin > Arm64BRange {
		return nil, fmt.Errorf("%w: text [%#x, %#x) is too large for one pool", ErrArm64NoReach, lo, hi)
	}
	low := uint64(0)
	if hi > Arm64BRange-margin {
		low = (hi - Arm64BRange + margin + arm64PageSize - 1) &^ (arm64PageSize - 1)
	}
	high := (lo + Arm64BRange - margin - size) &^ (arm64PageSize - 1)
	var hints []uint64
	below := (lo - size) &^ (arm64PageSize - 1)
	above := (hi + arm64PageSize - 1) &^ (arm64PageSize - 1)
	for step := uint64(0); len(hints) < 64; step += 1 << 20 {
		n := len(hints)
		if lo >= size && below >= step && below-step >= low && below-step >= arm64PageSize {
			hints = append(hints, below-step)
		}
		if above+step <= high && above+step+size > above {
			hints = append(hints, above+step)
		}
		if len(hints) == n {
			break
		}
	}
	if len(hints) == 0 {
		return nil, fmt.Errorf("%w: no address near [%#x, %#x)", ErrArm64NoReach, lo, hi)
	}
	return arm64MapPool(size, hints)
}

func arm64MapPool(size uint64, hints []uint64) (*Arm64MappedPool, error) {
	size = (size + arm64PageSize - 1) &^ (arm64PageSize - 1)
	fd, err := unix.MemfdCreate("kbox-rewrite-pool", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("rewrite/arm64: pool memfd: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rewrite/arm64: pool memfd: %w", err)
	}
	rw, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rewrite/arm64: pool alias: %w", err)
	}
	for _, hint := range hints {
		flags := uintptr(unix.MAP_SHARED)
		if hint != 0 {
			flags |= unix.MAP_FIXED_NOREPLACE
		}
		addr, _, errno := unix.Syscall6(unix.SYS_MMAP, uintptr(hint), uintptr(size),
			unix.PROT_READ|unix.PROT_EXEC, flags, uintptr(fd), 0)
		if errno != 0 {
			if errno == unix.EEXIST || errno == unix.EPERM || errno == unix.ENOMEM {
				continue // taken, below mmap_min_addr, or out of the address space
			}
			unix.Munmap(rw)
			unix.Close(fd)
			return nil, fmt.Errorf("rewrite/arm64: pool at %#x: %w", hint, errno)
		}
		if hint != 0 && uint64(addr) != hint {
			// An old kernel took MAP_FIXED_NOREPLACE as a hint.
			unix.Syscall(unix.SYS_MUNMAP, addr, uintptr(size), 0)
			continue
		}
		return &Arm64MappedPool{
			Arm64Pool: &Arm64Pool{Base: uint64(addr), Size: size, Alias: Arm64SliceAlias{Base: uint64(addr), Mem: rw}},
			fd:        fd,
			rw:        rw,
		}, nil
	}
	unix.Munmap(rw)
	unix.Close(fd)
	return nil, fmt.Errorf("%w: every address tried is taken", ErrArm64NoReach)
}

// Close unmaps the pool. Only when no guest thread can be in it.
func (p *Arm64MappedPool) Close() error {
	if p.rw == nil {
		return errors.New("rewrite/arm64: pool closed twice")
	}
	_, _, errno := unix.Syscall(unix.SYS_MUNMAP, uintptr(p.Base), uintptr(p.Size), 0)
	err := unix.Munmap(p.rw)
	unix.Close(p.fd)
	p.rw = nil
	if errno != 0 {
		return errno
	}
	return err
}

// Rw is the pool's writable alias.
func (p *Arm64MappedPool) Rw() []byte { return p.rw }
