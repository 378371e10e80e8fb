package dispatch

import "github.com/kbox-project/kbox/seccomp"

// The architectures' syscall numbers are the filter compiler's
// (seccomp.ArchX86_64, seccomp.ArchAArch64: kbox's tables, generated from
// the kernel's headers), so that the number the engine
// indexes with is the number the filter matched. linux, the running
// architecture's table indexed by number, is built from them and table
// once, at init: the engine's dispatch stays an array lookup. It is built
// in the heap: an array of MaxNr entries returned by value would take a
// 64 KB stack frame, whose growth and copy cost init more than the rest.
var linux, _ = numbered(seccomp.NativeArch())

// numbered lays table out by the syscall numbers of arch a: the entry of
// each number a names, and the names of a without an entry (which stay
// Unknown: ENOSYS).
func numbered(a *seccomp.Arch) (t *[MaxNr]Syscall, missing []string) {
	t = new([MaxNr]Syscall)
	if a == nil {
		return t, nil
	}
	byName := make(map[string]*Syscall, len(table))
	for i := range table {
		byName[table[i].Name] = &table[i]
	}
	for nr := range a.Len() {
		name := a.SyscallName(nr)
		if name == "" {
			continue
		}
		s, ok := byName[name]
		switch {
		case nr >= MaxNr:
			missing = append(missing, name)
		case !ok:
			missing = append(missing, name)
		default:
			t[nr] = *s
		}
	}
	return t, missing
}
