//go:build linux && amd64 && cgo

package trap

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/elfload"
	"golang.org/x/sys/unix"
)

// execTier is the trap tier's dispatch.Tier: an execve inside the guest
// loads the new program into this process (elfload) and restarts the
// calling thread at its entry. The engine has resolved and checked the
// file and reads it (x); after a result without an errno it commits what
// an execve does to its side of the process (virtual fds, exe,
// credentials). The tier does the rest: the guest's memory, its host fds
// marked close-on-exec, its signal handlers, its other threads.
type execTier struct{}

// Limits of what execve copies from the guest (Linux's MAX_ARG_STRINGS is
// larger; elfload checks the sizes against the stack as execve does).
const (
	maxArgs   = 1 << 16
	maxArgLen = 32 * pageSize // MAX_ARG_STRLEN
)

func (execTier) Exec(r *dispatch.Request, x *dispatch.Exec) dispatch.Result {
	t := tr
	th := r.G.(*guest).t
	argvAddr, envpAddr := r.Args[1], r.Args[2]
	if r.Nr == unix.SYS_EXECVEAT {
		argvAddr, envpAddr = r.Args[2], r.Args[3]
	}
	argv, en := readStrings(argvAddr)
	if en != 0 {
		return execErr(en)
	}
	envp, en := readStrings(envpAddr)
	if en != 0 {
		return execErr(en)
	}
	name := x.Given
	if name == "" {
		name = x.Path
	}
	if x.Script {
		// As the kernel's binfmt_script: interpreter, its argument,
		// the script's path, then argv without argv[0].
		nargv := []string{x.ScriptInterp}
		if x.ScriptArg != "" {
			nargv = append(nargv, x.ScriptArg)
		}
		nargv = append(nargv, name)
		if len(argv) > 1 {
			nargv = append(nargv, argv[1:]...)
		}
		argv = nargv
	}
	main, en := x.ProgramMemfd("")
	if en != 0 {
		return execErr(en)
	}
	defer unix.Close(main)
	loader, en := x.LoaderMemfd()
	if en != 0 {
		return execErr(en)
	}
	if loader >= 0 {
		defer unix.Close(loader)
	}
	c := r.P.Cred()
	spec := &elfload.Spec{
		Prog: elfload.Image{Name: x.Path, FD: main},
		Argv: argv, Envp: envp, ExecFn: name,
		UID: c.UID, EUID: c.EUID, GID: c.GID, EGID: c.EGID,
		BrkSize: brkSize,
	}
	if loader >= 0 {
		spec.Interp = &elfload.Image{Name: x.Info().Interp, FD: loader}
	}
	l, err := elfload.Load(spec)
	tornDown := false
	if errors.Is(err, unix.EEXIST) {
		// A non-PIE program where the old one is: the old image goes
		// first. From here a failure kills the guest, as a failed
		// execve past its point of no return does.
		t.tearDown(th)
		tornDown = true
		l, err = elfload.Load(spec)
		if err != nil {
			t.note("exec", "trap tier: loading "+x.Path+" after the old program was gone failed: "+err.Error())
			t.finish(Exit{Status: 128 + int(unix.SIGSEGV), Signal: int(unix.SIGSEGV)})
			th.die.Store(true)
			return dispatch.Result{Action: dispatch.Return, Disp: x.Disp}
		}
	}
	if err != nil {
		var le *elfload.Error
		if errors.As(err, &le) && le.Errno != 0 {
			return execErr(le.Errno)
		}
		return execErr(unix.ENOEXEC)
	}
	if !tornDown {
		t.tearDown(th)
	}
	t.loaded = l
	for _, rg := range l.Regions {
		t.mem.add(uint64(rg.Start), uint64(rg.End))
	}
	t.fds.closeOnExec()
	// Handlers go back to the default; ignored signals stay ignored, the
	// mask and pending signals stay (execve(2)).
	t.sig.mu.Lock()
	for i := range t.sig.act {
		if t.sig.act[i].handler != sigIgn {
			t.sig.act[i] = kaction{}
		}
	}
	th.savedMask = nil
	t.sig.mu.Unlock()
	th.ss.sp, th.ss.size, th.ss.flags = 0, 0, ssDisable
	th.ctid = 0
	th.k.Gregs = [len(th.k.Gregs)]uint64{}
	th.k.Gregs[regRSP] = uint64(l.SP)
	th.k.Gregs[regRIP] = uint64(l.Entry)
	th.k.Gregs[regEFL] = 0x202
	th.k.FSGuest = 0
	th.resetFPU()
	t.nameMain(th, name)
	return dispatch.Result{Action: dispatch.Return, Disp: x.Disp}
}

// nameMain makes th the guest's main thread in its /proc, running the
// program the guest named path: the thread's name is path's base name,
// as execve names the task (at most 15 bytes), and cmdline and environ
// are the program's argument and environment strings (dispatch.SetMain).
func (t *tier) nameMain(th *thread, path string) {
	name := path
	if i := strings.LastIndexByte(strings.TrimRight(path, "/"), '/'); i >= 0 {
		name = strings.TrimRight(path, "/")[i+1:]
	}
	if len(name) > 15 {
		name = name[:15]
	}
	os.WriteFile("/proc/self/task/"+strconv.Itoa(th.tid)+"/comm", []byte(name), 0)
	if t.proc != nil && t.loaded != nil {
		t.proc.SetMain(th.tid, t.loaded.Args)
	}
}

func execErr(en unix.Errno) dispatch.Result {
	return dispatch.Result{Action: dispatch.Return, Disp: dispatch.Emulated, Errno: en}
}

// tearDown ends the old program's image: every other guest thread is
// told to die (kicked: it leaves at its next way back to guest code), and
// all of the guest's memory is unmapped, each range once: the guard's
// set (t.mem) is the guest's memory as it is now. The loader's own list
// is not unmapped as well: once a range is unmapped, any thread of kbox
// (an LKL timer thread's new stack, Go) may map there, and a second
// munmap of it would pull that memory from under its owner (the exec
// chain's SIGSEGV, docs/tiers.md).
func (t *tier) tearDown(self *thread) {
	t.each(func(o *thread) {
		if o != self {
			o.die.Store(true)
			o.kick()
		}
	})
	t.rwReset()
	if t.loaded != nil {
		t.loaded.Release()
		t.loaded = nil
	}
	for _, s := range t.mem.list() {
		a := [6]uint64{s.lo, s.hi - s.lo}
		t.mem.removing(s.lo, s.hi)
		native(unix.SYS_MUNMAP, &a)
		t.mem.remove(s.lo, s.hi)
	}
}

// readStrings reads a NULL-terminated array of string pointers (argv,
// envp) from guest memory; a NULL array is empty, as Linux takes it.
func readStrings(addr uint64) ([]string, unix.Errno) {
	var out []string
	if addr == 0 {
		return nil, 0
	}
	for i := 0; ; i++ {
		if i >= maxArgs {
			return nil, unix.E2BIG
		}
		p, err := readU64(addr + uint64(8*i))
		if err != nil {
			return nil, unix.EFAULT
		}
		if p == 0 {
			return out, 0
		}
		s, en := readString(p)
		if en != 0 {
			return nil, en
		}
		out = append(out, s)
	}
}

// readString reads a NUL-terminated string of guest memory.
func readString(addr uint64) (string, unix.Errno) {
	var b []byte
	buf := make([]byte, 256)
	for len(b) < maxArgLen {
		n, err := readSome(addr+uint64(len(b)), buf)
		if err != nil {
			return "", unix.EFAULT
		}
		for i := 0; i < n; i++ {
			if buf[i] == 0 {
				return string(append(b, buf[:i]...)), 0
			}
		}
		b = append(b, buf[:n]...)
	}
	return "", unix.E2BIG
}
