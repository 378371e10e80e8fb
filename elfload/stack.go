package elfload

import (
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Limits on the arguments, as execve checks them.
const (
	maxArgStrlen = 32 * 4096 // MAX_ARG_STRLEN: one argument or environment string
	minArgSpace  = 128 << 10 // ARG_MAX: the least room arguments always get
	maxArgSpace  = 6 << 20   // _STK_LIM / 4 * 3: the most they get
)

// stackInput is what goes on a new program's stack.
type stackInput struct {
	argv, envp             []string
	execfn                 string
	platform, basePlatform string
	random                 [16]byte
	aux                    []auxEntry // from guestAuxv
	size                   uint64     // of the stack mapping
}

// stackOut is the built initial stack: the bytes from sp to the top of the
// stack, the auxv placed in them, and where the argument and environment
// strings lie: [argStart, argEnd, envStart, envEnd).
type stackOut struct {
	img  []byte
	sp   uint64
	aux  []auxEntry
	args [4]uint64
}

// argError is an argument list execve would refuse.
func argError(errno unix.Errno, format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Errno: errno}
}

// checkArgs refuses what execve refuses: a string longer than
// MAX_ARG_STRLEN and arguments that take more than a quarter of the stack
// (at least ARG_MAX, at most 6 MiB), and, since a C string cannot hold
// one, a NUL byte.
func checkArgs(in *stackInput) error {
	total := uint64(len(in.argv)+len(in.envp)+2) * 8
	for _, list := range [][]string{in.argv, in.envp, {in.execfn}} {
		for _, s := range list {
			if len(s)+1 > maxArgStrlen {
				return argError(unix.E2BIG, "argument list too long: a string of %d bytes", len(s))
			}
			if strings.IndexByte(s, 0) >= 0 {
				return argError(unix.EINVAL, "argument %q holds a NUL byte", s)
			}
			total += uint64(len(s)) + 1
		}
	}
	limit := min(uint64(maxArgSpace), in.size/4)
	limit = max(limit, minArgSpace)
	if total > limit || total > in.size/2 {
		return argError(unix.E2BIG, "argument list too long: %d bytes, the limit is %d", total, min(limit, in.size/2))
	}
	return nil
}

// buildStack lays out a program's initial stack below top as the kernel's
// execve does (fs/exec.c, fs/binfmt_elf.c create_elf_tables), without its
// random offset:
//
//	top-8:  8 zero bytes
//	        AT_EXECFN's string, the environment strings, the argument
//	        strings (argv[0] lowest)
//	        down to a 16-byte boundary
//	        AT_PLATFORM's string, AT_BASE_PLATFORM's, AT_RANDOM's 16 bytes
//	        padding to a 16-byte boundary for sp
//	sp:     argc, argv[0..argc-1], NULL, envp[...], NULL, auxv pairs, AT_NULL
//
// An empty argv becomes {""}, as Linux does since 5.18.
func buildStack(top uint64, in *stackInput) (*stackOut, error) {
	argv := in.argv
	if len(argv) == 0 {
		argv = []string{""}
	}
	p := top - 8
	place := func(s string) uint64 {
		p -= uint64(len(s)) + 1
		return p
	}
	execfn := place(in.execfn)
	envAddr := make([]uint64, len(in.envp))
	for i := len(in.envp) - 1; i >= 0; i-- {
		envAddr[i] = place(in.envp[i])
	}
	argAddr := make([]uint64, len(argv))
	for i := len(argv) - 1; i >= 0; i-- {
		argAddr[i] = place(argv[i])
	}
	p &^= 15
	var platform, basePlatform uint64
	if in.platform != "" {
		platform = place(in.platform)
	}
	if in.basePlatform != "" {
		basePlatform = place(in.basePlatform)
	}
	p -= 16
	random := p

	aux := make([]auxEntry, 0, len(in.aux))
	for _, e := range in.aux {
		switch e.typ {
		case atExecfn:
			e.val = execfn
		case atRandom:
			e.val = random
		case atPlatform:
			if platform == 0 {
				continue
			}
			e.val = platform
		case atBasePlatform:
			if basePlatform == 0 {
				continue
			}
			e.val = basePlatform
		}
		aux = append(aux, e)
	}
	words := uint64(1+len(argv)+1+len(in.envp)+1) + uint64(2*len(aux)+2)
	sp := (p - words*8) &^ 15
	if top-sp > in.size {
		return nil, argError(unix.E2BIG, "argument list too long for a stack of %d bytes", in.size)
	}

	img := make([]byte, top-sp)
	le := binary.LittleEndian
	at := func(addr uint64) []byte { return img[addr-sp:] }
	w := at(sp)
	put := func(v uint64) {
		le.PutUint64(w, v)
		w = w[8:]
	}
	put(uint64(len(argv)))
	for _, a := range argAddr {
		put(a)
	}
	put(0)
	for _, a := range envAddr {
		put(a)
	}
	put(0)
	for _, e := range aux {
		put(e.typ)
		put(e.val)
	}
	put(atNull)
	put(0)
	copy(at(random), in.random[:])
	if platform != 0 {
		copy(at(platform), in.platform)
	}
	if basePlatform != 0 {
		copy(at(basePlatform), in.basePlatform)
	}
	for i, a := range argAddr {
		copy(at(a), argv[i])
	}
	for i, a := range envAddr {
		copy(at(a), in.envp[i])
	}
	copy(at(execfn), in.execfn)
	// As Linux's mm->arg_start ... env_end: the arguments end where the
	// environment begins, which ends at AT_EXECFN's string.
	argEnd := execfn
	if len(envAddr) > 0 {
		argEnd = envAddr[0]
	}
	args := [4]uint64{argAddr[0], argEnd, argEnd, execfn}
	return &stackOut{img: img, sp: sp, aux: aux, args: args}, nil
}
