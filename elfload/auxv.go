package elfload

import (
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Auxiliary vector entry types (include/uapi/linux/auxvec.h and the
// arch headers). debug/elf has none of them.
const (
	atNull          = 0
	atExecfd        = 2
	atPhdr          = 3
	atPhent         = 4
	atPhnum         = 5
	atPagesz        = 6
	atBase          = 7
	atFlags         = 8
	atEntry         = 9
	atUID           = 11
	atEUID          = 12
	atGID           = 13
	atEGID          = 14
	atPlatform      = 15
	atHwcap         = 16
	atClktck        = 17
	atSecure        = 23
	atBasePlatform  = 24
	atRandom        = 25
	atHwcap2        = 26
	atExecfn        = 31
	atSysinfoEhdr   = 33
	atMinsigstksz   = 51
	maxPlatformName = 64
)

// auxEntry is one auxv pair.
type auxEntry struct{ typ, val uint64 }

// hostAux is kbox's own auxiliary vector, as the kernel gave it: what the
// kernel would give any program on this machine (hardware capabilities,
// page size, clock ticks, the vDSO, the signal stack minimum, rseq's
// sizes), in the kernel's order.
type hostAux struct {
	entries                []auxEntry // without AT_NULL
	platform, basePlatform string
}

var (
	hostOnce sync.Once
	host     hostAux
)

// hostAuxv reads kbox's auxv once, from the copy the Go runtime keeps
// (golang.org/x/sys/unix.Auxv). The platform strings it points to are in
// kbox's own initial stack and are copied.
func hostAuxv() *hostAux {
	hostOnce.Do(func() {
		v, err := unix.Auxv()
		for _, e := range v {
			if err != nil || e[0] == atNull {
				break
			}
			host.entries = append(host.entries, auxEntry{uint64(e[0]), uint64(e[1])})
			switch e[0] {
			case atPlatform:
				host.platform = cString(e[1], maxPlatformName)
			case atBasePlatform:
				host.basePlatform = cString(e[1], maxPlatformName)
			}
		}
		if len(host.entries) == 0 {
			// No auxv (never on Linux): what the kernel gives everywhere.
			host.entries = []auxEntry{{atPagesz, uint64(os.Getpagesize())}, {atClktck, 100}}
		}
		if host.platform == "" {
			switch runtime.GOARCH {
			case "amd64":
				host.platform = "x86_64"
			case "arm64":
				host.platform = "aarch64"
			}
		}
	})
	return &host
}

// auxFacts are the entries that describe the loaded program.
type auxFacts struct {
	phdr, phnum, base, entry uint64
	uid, euid, gid, egid     uint32
	secure                   bool
}

// guestAuxv builds the program's auxv from kbox's own, in the same order,
// so it reads as the kernel would have made it for the program: the
// program's entries replace kbox's, the machine's are kept, and kbox's
// AT_EXECFD (never there for an ELF started by execve) is dropped. The
// string entries (AT_PLATFORM, AT_BASE_PLATFORM, AT_EXECFN) and AT_RANDOM
// are filled in by buildStack. Entries every program gets that kbox's
// auxv lacks are appended in the kernel's order.
func guestAuxv(h *hostAux, f *auxFacts) []auxEntry {
	out := make([]auxEntry, 0, len(h.entries)+8)
	have := map[uint64]bool{}
	set := func(typ uint64) (uint64, bool) {
		switch typ {
		case atPhdr:
			return f.phdr, true
		case atPhent:
			return phdrSize, true
		case atPhnum:
			return f.phnum, true
		case atBase:
			return f.base, true
		case atFlags:
			return 0, true
		case atEntry:
			return f.entry, true
		case atUID:
			return uint64(f.uid), true
		case atEUID:
			return uint64(f.euid), true
		case atGID:
			return uint64(f.gid), true
		case atEGID:
			return uint64(f.egid), true
		case atSecure:
			if f.secure {
				return 1, true
			}
			return 0, true
		case atRandom, atExecfn, atPlatform, atBasePlatform:
			return 0, true // buildStack
		}
		return 0, false
	}
	for _, e := range h.entries {
		if e.typ == atExecfd || have[e.typ] {
			continue
		}
		if v, ok := set(e.typ); ok {
			e.val = v
		}
		have[e.typ] = true
		out = append(out, e)
	}
	for _, typ := range []uint64{atPagesz, atPhdr, atPhent, atPhnum, atBase, atFlags, atEntry,
		atUID, atEUID, atGID, atEGID, atSecure, atRandom, atExecfn, atPlatform} {
		if have[typ] || typ == atPlatform && h.platform == "" {
			continue
		}
		v, ok := set(typ)
		if !ok {
			v = uint64(os.Getpagesize()) // atPagesz
		}
		out = append(out, auxEntry{typ, v})
	}
	return out
}
