package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"golang.org/x/arch/x86/x86asm"
)

// --syscall-mode=auto (docs/tiers.md, Auto): the in-process rewrite tier
// for a program that cannot fork or exec, the seccomp tier otherwise,
// decided before the launch from the program's ELF (and its libraries'),
// never by launching twice. The analysis is conservative: when it cannot
// tell, the answer is seccomp, which runs everything.

// shells are programs whose job is to start others, by name.
var shells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "ash": true, "zsh": true, "ksh": true, "mksh": true,
	"busybox": true, "fish": true, "tcsh": true, "csh": true, "env": true, "xargs": true,
	"make": true, "nohup": true, "timeout": true, "nice": true, "su": true, "sudo": true,
}

// spawners are the libc functions that make a process or replace the
// program: a dynamic program importing one, or a static one defining one,
// may fork or exec.
var spawners = map[string]bool{
	"fork": true, "vfork": true, "_Fork": true, "__fork": true, "clone": true, "clone3": true,
	"posix_spawn": true, "posix_spawnp": true, "system": true, "popen": true,
	"execve": true, "execv": true, "execvp": true, "execvpe": true, "execl": true,
	"execlp": true, "execle": true, "fexecve": true, "execveat": true, "daemon": true,
	"forkpty": true, "wordexp": true, "syscall": true, // syscall(2): any number at all
}

// execs are the spawners that replace the program without making a
// process. In a library they are not counted: a library that execs
// without forking replaces the program, which the in-process tiers carry
// out (docs/tiers.md, Auto); libselinux, which ls and cp link, imports
// execve so.
var execs = map[string]bool{
	"execve": true, "execv": true, "execvp": true, "execvpe": true, "execl": true,
	"execlp": true, "execle": true, "fexecve": true, "execveat": true,
}

// forkNrs are the x86_64 syscalls that make a process or exec: fork,
// vfork, execve, execveat, clone3; clone (56) counts where nothing tells
// a thread's clone from a process's (a static program without symbols).
var forkNrs = map[int64]bool{57: true, 58: true, 59: true, 322: true, 435: true}

// libc's own objects define the spawners: their imports say nothing.
func isLibc(name string) bool {
	for _, p := range []string{"libc.so", "ld-linux", "libc.musl", "ld-musl", "libpthread.so", "libdl.so", "librt.so", "libm.so"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// libDirs are where a DT_NEEDED library is looked for in the image.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"}

// tierChoice analyses a program: command is the name it was given, prog
// its ELF, readLib reads a file of the image (for its libraries). It
// returns "rewrite" or "seccomp" and why.
func tierChoice(command string, prog io.ReaderAt, readLib func(string) (io.ReaderAt, error)) (string, string) {
	if shells[path.Base(command)] {
		return "seccomp", "a shell or launcher (" + path.Base(command) + ")"
	}
	f, err := elf.NewFile(prog)
	if err != nil {
		return "seccomp", "not an ELF program"
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return "seccomp", "not an x86_64 program"
	}
	if why := spawnsGo(f); why != "" {
		return "seccomp", why
	}
	if f.Section(".interp") != nil || hasInterp(f) {
		if why := spawnsDynamic(f, readLib); why != "" {
			return "seccomp", why
		}
		return "rewrite", "a dynamic program importing no fork, exec or spawn"
	}
	if why := spawnsStatic(f, f.Section(".gopclntab") != nil); why != "" {
		return "seccomp", why
	}
	return "rewrite", "a static program with no fork, exec or spawn"
}

func hasInterp(f *elf.File) bool {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// spawnsDynamic looks at the imports of the program and of its libraries
// (DT_NEEDED, transitively, libc's own left out).
func spawnsDynamic(f *elf.File, readLib func(string) (io.ReaderAt, error)) string {
	seen := map[string]bool{}
	var check func(f *elf.File, who string, depth int) string
	check = func(f *elf.File, who string, depth int) string {
		syms, err := f.ImportedSymbols()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return who + ": unreadable dynamic symbols"
		}
		for _, s := range syms {
			if spawners[s.Name] && (depth == 0 || !execs[s.Name]) {
				return who + " imports " + s.Name
			}
		}
		libs, _ := f.ImportedLibraries()
		for _, l := range libs {
			if isLibc(l) || seen[l] {
				continue
			}
			seen[l] = true
			if depth > 8 || len(seen) > 64 {
				return "too many libraries to analyse"
			}
			r, err := findLib(l, readLib)
			if err != nil {
				return "library " + l + " not found in the image"
			}
			lf, err := elf.NewFile(r)
			if err != nil {
				return "library " + l + " is not ELF"
			}
			why := check(lf, l, depth+1)
			lf.Close()
			if why != "" {
				return why
			}
		}
		return ""
	}
	return check(f, "the program", 0)
}

func findLib(name string, readLib func(string) (io.ReaderAt, error)) (io.ReaderAt, error) {
	if strings.Contains(name, "/") {
		return readLib(name)
	}
	for _, d := range libDirs {
		if r, err := readLib(d + "/" + name); err == nil {
			return r, nil
		}
	}
	return nil, errors.New("not found")
}

// goSpawners are the functions of a Go program that fork or exec. Go makes
// those syscalls itself, not through libc, and with the number loaded
// from memory (syscall.rawVforkSyscall, Syscall6; linked into every Go
// program, so not itself a sign), so neither a static
// program's code scan nor a dynamic one's imports see them: os/exec in the
// rewrite tier failed with ENOSYS.
var goSpawners = []string{"syscall.forkExec", "syscall.Exec", "golang.org/x/sys/unix.Exec"}

// spawnsGo looks for goSpawners among the function names of a Go
// program's .gopclntab (NUL-separated; kept by a stripped build too):
// the linker keeps only the functions a program can call.
func spawnsGo(f *elf.File) string {
	sec := f.Section(".gopclntab")
	if sec == nil {
		return ""
	}
	tab, err := sec.Data()
	if err != nil {
		return "unreadable .gopclntab"
	}
	for _, name := range goSpawners {
		if bytes.Contains(tab, []byte("\x00"+name+"\x00")) {
			return "a Go program with " + name
		}
	}
	return ""
}

// spawnsStatic looks at a static program: its symbol table when it has
// one, and its code for `mov $nr,%eax` (or %al) before a syscall with a
// fork or exec number. A stripped Go program (goProg) was answered by
// spawnsGo: its function names are in .gopclntab, and its clones without
// symbols (every Go program makes threads) would all count.
func spawnsStatic(f *elf.File, goProg bool) string {
	syms, err := f.Symbols()
	hasSyms := err == nil && len(syms) > 0
	if goProg && !hasSyms {
		return ""
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && spawners[s.Name] && s.Name != "syscall" {
			return "defines " + s.Name
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		code := make([]byte, p.Filesz)
		if _, err := p.ReadAt(code, 0); err != nil {
			return "unreadable code"
		}
		if nr, ok := forkSyscall(code, !hasSyms); ok {
			return fmt.Sprintf("makes syscall %d (fork, clone or exec)", nr)
		}
	}
	return ""
}

// forkSyscall decodes code linearly and reports a syscall whose number,
// the last immediate moved into %eax/%rax/%al in the same straight-line
// run, is a fork or exec (clone too, with clone).
func forkSyscall(code []byte, clone bool) (int64, bool) {
	last := int64(-1)
	for i := 0; i < len(code); {
		inst, err := x86asm.Decode(code[i:], 64)
		if err != nil || inst.Len == 0 {
			i++
			last = -1
			continue
		}
		i += inst.Len
		switch inst.Op {
		case x86asm.MOV:
			if r, ok := inst.Args[0].(x86asm.Reg); ok && (r == x86asm.EAX || r == x86asm.RAX || r == x86asm.AL) {
				if imm, ok := inst.Args[1].(x86asm.Imm); ok {
					last = int64(imm)
				} else {
					last = -1
				}
			}
		case x86asm.SYSCALL:
			if forkNrs[last] || clone && last == 56 {
				return last, true
			}
		case x86asm.JMP, x86asm.RET, x86asm.CALL:
			last = -1
		}
	}
	return 0, false
}
