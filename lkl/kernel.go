package lkl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sys/unix"
)

// What the linked kernel has, found at run time: kbox links whatever
// liblkl it is given (docs/lkl.md). The kernel's own configuration, from
// its /proc/config.gz, is the authority when the kernel has one
// (CONFIG_IKCONFIG_PROC, as kbox's configuration does); without it each
// feature is probed: a system call that a kernel without the feature
// answers ENOSYS, a name in /proc/filesystems or /proc/devices, a symbol
// in /proc/kallsyms.

// kboxFragment is kbox's configuration of LKL (make lkl).
//
//go:embed kbox.config
var kboxFragment []byte

// KboxFragment returns kbox's configuration fragment, lkl/kbox.config, as
// CONFIG_NAME: value ("n" for "is not set").
func KboxFragment() map[string]string { return ParseConfig(kboxFragment) }

// ParseConfig reads a kernel configuration (.config or a fragment):
// CONFIG_NAME=value lines, and "# CONFIG_NAME is not set" as value "n".
// Other lines are ignored.
func ParseConfig(b []byte) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "CONFIG_") && !strings.ContainsAny(k, " #") {
			m[k] = v
			continue
		}
		if rest, ok := strings.CutPrefix(l, "# CONFIG_"); ok {
			if name, ok := strings.CutSuffix(rest, " is not set"); ok && !strings.Contains(name, " ") {
				m["CONFIG_"+name] = "n"
			}
		}
	}
	return m
}

// Satisfies reports the options of fragment that config does not have,
// as "CONFIG_NAME" lines; none means config has the whole fragment. An
// option the fragment turns off may be absent from config.
func Satisfies(config, fragment map[string]string) []string {
	var missing []string
	for k, want := range fragment {
		got, ok := config[k]
		if want == "n" && (!ok || got == "n") || ok && got == want {
			continue
		}
		missing = append(missing, k)
	}
	return missing
}

// Feature is one fact about the kernel, named as `kbox version` prints it.
type Feature struct {
	Name  string // KASAN, inotify, fanotify, loop, config.gz, devtmpfs, tmpfs, DWARF
	Value string // yes/no (on/off for KASAN; full/reduced/none for DWARF), or unknown
	Note  string // said in parentheses after the value, e.g. "ramfs"
}

// Kernel describes the linked kernel.
type Kernel struct {
	Release string
	// Config is the kernel's configuration, nil when it has no
	// /proc/config.gz.
	Config map[string]string
	// Configuration is "kbox" when Config has every option of
	// lkl/kbox.config, "other" when it does not, "unknown" without Config.
	Configuration string
	Features      []Feature
}

// Has reports whether the kernel has the named feature (any case), and
// whether that is known at all.
func (k Kernel) Has(name string) (has, known bool) {
	for _, f := range k.Features {
		if strings.EqualFold(f.Name, name) {
			switch f.Value {
			case "yes", "on", "full":
				return true, true
			case "unknown":
				return false, false
			}
			return false, true
		}
	}
	return false, false
}

// String is the kernel's line of `kbox version`, after "kernel: ".
func (k Kernel) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "LKL %s, configuration %s", k.Release, k.Configuration)
	if k.Config == nil {
		b.WriteString(" (no config.gz)")
	}
	for _, f := range k.Features {
		fmt.Fprintf(&b, ", %s %s", f.Name, f.Value)
		if f.Note != "" {
			fmt.Fprintf(&b, " (%s)", f.Note)
		}
	}
	return b.String()
}

// DetectKernel describes the running kernel; procfd is an LKL fd of a
// directory where the kernel's proc is mounted. With probeOnly it ignores
// /proc/config.gz and probes every feature (tests compare both ways).
func DetectKernel(procfd int, probeOnly bool) Kernel {
	var k Kernel
	if u, err := Uname(); err == nil {
		k.Release = unix.ByteSliceToString(u.Release[:])
	}
	gz, gzErr := ReadFileAt(procfd, "config.gz")
	if gzErr == nil && !probeOnly {
		if c, err := gunzip(gz); err == nil {
			k.Config = ParseConfig(c)
		}
	}
	k.Configuration = "unknown"
	if k.Config != nil {
		k.Configuration = "other"
		if len(Satisfies(k.Config, KboxFragment())) == 0 {
			k.Configuration = "kbox"
		}
	}
	opt := func(name string) (bool, bool) {
		if k.Config == nil {
			return false, false
		}
		return k.Config[name] == "y", true
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	// KASAN
	kasan := "unknown"
	if on, ok := opt("CONFIG_KASAN"); ok {
		kasan = map[bool]string{true: "on", false: "off"}[on]
	} else if on, err := hasSymbol(procfd, "kasan_report"); err == nil {
		kasan = map[bool]string{true: "on", false: "off"}[on]
	}
	k.Features = append(k.Features, Feature{Name: "KASAN", Value: kasan})
	// inotify, fanotify: ENOSYS without them.
	for _, p := range []struct {
		name, opt string
		probe     func() bool
	}{
		{"inotify", "CONFIG_INOTIFY_USER", func() bool { return probeFd(SysInotifyInit1, uintptr(OpenFlagsToLKL(unix.O_CLOEXEC)), 0) }},
		{"fanotify", "CONFIG_FANOTIFY", func() bool {
			return probeFd(SysFanotifyInit, 0 /* FAN_CLASS_NOTIF */, uintptr(OpenFlagsToLKL(unix.O_RDONLY)))
		}},
	} {
		has, ok := opt(p.opt)
		if !ok {
			has = p.probe()
		}
		k.Features = append(k.Features, Feature{Name: p.name, Value: yes(has)})
	}
	// loop: the block major "loop" in /proc/devices.
	loop, ok := opt("CONFIG_BLK_DEV_LOOP")
	if !ok {
		b, err := ReadFileAt(procfd, "devices")
		if err != nil {
			k.Features = append(k.Features, Feature{Name: "loop", Value: "unknown"})
		} else {
			_, blk, _ := bytes.Cut(b, []byte("Block devices:"))
			k.Features = append(k.Features, Feature{Name: "loop", Value: yes(hasField(blk, 1, "loop"))})
		}
	} else {
		k.Features = append(k.Features, Feature{Name: "loop", Value: yes(loop)})
	}
	k.Features = append(k.Features, Feature{Name: "config.gz", Value: yes(gzErr == nil)})
	// devtmpfs: a filesystem type; tmpfs proper (shmem) is what makes
	// memfd_create exist (CONFIG_MEMFD_CREATE): without it "tmpfs" is ramfs.
	devtmpfs, ok := opt("CONFIG_DEVTMPFS")
	if !ok {
		if b, err := ReadFileAt(procfd, "filesystems"); err != nil {
			k.Features = append(k.Features, Feature{Name: "devtmpfs", Value: "unknown"})
		} else {
			k.Features = append(k.Features, Feature{Name: "devtmpfs", Value: yes(hasField(b, 1, "devtmpfs") || hasField(b, 0, "devtmpfs"))})
		}
	} else {
		k.Features = append(k.Features, Feature{Name: "devtmpfs", Value: yes(devtmpfs)})
	}
	tmpfs, ok := opt("CONFIG_TMPFS")
	if !ok {
		tmpfs = probeFd(SysMemfdCreate, PtrOf(&probeName), unix.MFD_CLOEXEC)
	}
	f := Feature{Name: "tmpfs", Value: yes(tmpfs)}
	if !tmpfs {
		f.Note = "ramfs"
	}
	k.Features = append(k.Features, f)
	// DWARF: only the configuration says.
	dwarf := "unknown"
	if k.Config != nil {
		switch {
		case k.Config["CONFIG_DEBUG_INFO"] != "y":
			dwarf = "none"
		case k.Config["CONFIG_DEBUG_INFO_REDUCED"] == "y":
			dwarf = "reduced"
		default:
			dwarf = "full"
		}
	}
	k.Features = append(k.Features, Feature{Name: "DWARF", Value: dwarf})
	return k
}

var probeName = [...]byte{'k', 'b', 'o', 'x', 0}

// probeFd makes a system call that returns an fd, closes the fd, and
// reports whether the kernel has the call (anything but ENOSYS).
func probeFd(nr, a1, a2 uintptr) bool {
	r, e := Syscall6(nr, a1, a2, 0, 0, 0, 0)
	if e == 0 {
		Close(int(r))
	}
	return e != unix.ENOSYS
}

// hasField reports whether a line of b has word as its field i (fields
// split at blanks).
func hasField(b []byte, i int, word string) bool {
	for _, l := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(l))
		if len(f) > i && f[i] == word {
			return true
		}
	}
	return false
}

// hasSymbol reports whether /proc/kallsyms names sym (a kernel without
// KALLSYMS has no kallsyms: an error).
func hasSymbol(procfd int, sym string) (bool, error) {
	fd, err := Openat(procfd, "kallsyms", int(OpenFlagsToLKL(unix.O_RDONLY|unix.O_CLOEXEC)), 0)
	if err != nil {
		return false, err
	}
	defer Close(fd)
	sc := bufio.NewScanner(&lklReader{fd})
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[2] == sym {
			return true, nil
		}
	}
	return false, sc.Err()
}

// lklReader reads an LKL fd.
type lklReader struct{ fd int }

func (r *lklReader) Read(b []byte) (int, error) {
	n, err := Read(r.fd, b)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 16<<20))
}

// kernelProcDir is where Inspect mounts the kernel's proc in its own root.
const kernelProcDir = "/kbox-inspect-proc"

// Inspect boots the kernel without a disk, describes it and halts it: for
// a process that does nothing else with LKL (kbox version).
func Inspect() (Kernel, error) {
	if !Available {
		return Kernel{}, ErrNotBuilt
	}
	if err := Boot(Config{}); err != nil {
		return Kernel{}, err
	}
	defer Halt()
	if err := Mkdir(kernelProcDir, 0o555); err != nil && !errors.Is(err, unix.EEXIST) {
		return Kernel{}, fmt.Errorf("lkl: mkdir %s: %w", kernelProcDir, err)
	}
	if err := Mount("proc", kernelProcDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return Kernel{}, fmt.Errorf("lkl: mount proc: %w", err)
	}
	defer Umount(kernelProcDir, 0)
	fd, err := Open(kernelProcDir, int(OpenFlagsToLKL(unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)), 0)
	if err != nil {
		return Kernel{}, fmt.Errorf("lkl: open %s: %w", kernelProcDir, err)
	}
	defer Close(fd)
	return DetectKernel(fd, false), nil
}
