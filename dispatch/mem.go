package dispatch

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// PathMax bounds strings read from the guest.
const PathMax = 4096

// readString reads a NUL-terminated string of at most limit bytes from guest
// memory, page by page so that a string ending just before unmapped memory
// still reads. Bad pointers give EFAULT; over-long strings ENAMETOOLONG.
func readString(g Guest, addr uint64, limit int) (string, unix.Errno) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	sc := getScratch()
	defer putScratch(sc)
	limit = min(limit, len(sc.str))
	buf := sc.str[:]
	got := 0
	for got < limit {
		chunk := 4096 - int((addr+uint64(got))%4096)
		chunk = min(chunk, limit-got)
		n, err := g.ReadSome(addr+uint64(got), buf[got:got+chunk])
		n = max(0, min(n, chunk)) // whatever the tier returns with its error
		if i := bytes.IndexByte(buf[got:got+n], 0); i >= 0 {
			return intern(buf[:got+i]), 0
		}
		got += n
		if err != nil || n < chunk {
			return "", unix.EFAULT
		}
	}
	return "", unix.ENAMETOOLONG
}

// readPath reads a path argument and checks the request is still valid.
// The first path read is kept in r.Path for the observatory.
func readPath(r *Request, addr uint64) (string, unix.Errno) {
	s, en := readString(r.G, addr, PathMax)
	if en != 0 {
		return "", en
	}
	if r.G.Valid() != nil {
		return "", unix.ENOENT
	}
	if r.Path == "" {
		r.Path = s
	}
	return s, 0
}

// checkStrings checks an execve argv or envp array as the kernel will read
// it: every pointer readable and every string NUL-terminated within
// maxArgStrlen. execve rewrites the guest's path string before the host
// kernel runs it, and that rewrite outlives an exec the kernel then fails,
// so what would fail must fail first. A NULL array is valid.
func checkStrings(g Guest, addr uint64) unix.Errno {
	if addr == 0 {
		return 0
	}
	sc := getScratch()
	defer putScratch(sc)
	var ptrs [64]uint64
	for i := 0; i < maxArgStrings; i += len(ptrs) {
		raw := asBytes(&ptrs)
		n, _ := g.ReadSome(addr+uint64(i*8), raw)
		if n < 8 {
			return unix.EFAULT
		}
		for _, p := range ptrs[:n/8] {
			if p == 0 {
				return 0
			}
			if en := checkString(g, p, sc.str[:]); en != 0 {
				return en
			}
		}
		if n < len(raw) {
			return unix.EFAULT // the array runs into unmapped memory
		}
	}
	return 0 // longer arrays are the kernel's to judge
}

// maxArgStrlen is the kernel's MAX_ARG_STRLEN; maxArgStrings bounds how
// many strings checkStrings looks at.
const (
	maxArgStrlen  = 32 * 4096
	maxArgStrings = 1 << 16
)

// checkString finds the NUL of the string at addr, reading through buf.
func checkString(g Guest, addr uint64, buf []byte) unix.Errno {
	for got := 0; got < maxArgStrlen; {
		chunk := min(4096-int((addr+uint64(got))%4096), len(buf))
		n, _ := g.ReadSome(addr+uint64(got), buf[:chunk])
		n = max(0, min(n, chunk))
		if bytes.IndexByte(buf[:n], 0) >= 0 {
			return 0
		}
		if n < chunk {
			return unix.EFAULT
		}
		got += n
	}
	return unix.E2BIG
}
