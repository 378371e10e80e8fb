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

// readStrings reads a NULL-terminated array of string pointers (argv, envp).
func readStrings(g Guest, addr uint64, maxCount, maxTotal int) ([]string, unix.Errno) {
	var out []string
	if addr == 0 {
		return nil, 0
	}
	total := 0
	var p [8]byte
	for i := 0; ; i++ {
		if i >= maxCount {
			return nil, unix.E2BIG
		}
		if err := g.Read(addr+uint64(i*8), p[:]); err != nil {
			return nil, unix.EFAULT
		}
		sp := uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
			uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56
		if sp == 0 {
			return out, 0
		}
		s, en := readString(g, sp, PathMax)
		if en != 0 {
			return nil, en
		}
		total += len(s) + 1
		if total > maxTotal {
			return nil, unix.E2BIG
		}
		out = append(out, s)
	}
}
