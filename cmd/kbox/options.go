package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/oci"
	"github.com/kbox-project/kbox/scratchfs"
	"github.com/kbox-project/kbox/usernet"
)

// RootMode is how much of a system the image becomes.
type RootMode int

const (
	// RootRaw mounts the image and nothing else (-r).
	RootRaw RootMode = iota + 1
	// RootRecommended adds proc, sysfs, /tmp and /dev (-R).
	RootRecommended
	// RootSystem adds the recommended mounts and root identity (-S).
	RootSystem
)

// Bind is a host directory shown inside the guest (-b SRC:DST[:ro]).
type Bind struct {
	Src, Dst string
	ReadOnly bool
}

// ID is a uid:gid pair.
type ID struct{ UID, GID uint32 }

// ImageOptions holds the parsed `kbox image` command line.
type ImageOptions struct {
	Image        string
	Mode         RootMode
	FSType       string
	Partition    int
	WorkDir      string
	Command      []string
	Cmdline      string
	MountOpts    []string
	Binds        []Bind
	RootID       bool
	ChangeID     *ID
	MountProfile string
	ReadOnly     bool
	SyscallMode  string
	TierWhy      string // why this tier runs (auto), for -v and --stats
	// How the command, work dir and identity were given: an imported
	// image's configuration fills in what the command line leaves out
	// (imageconfig.go).
	CommandFrom  string // "", "--" or "-c"
	WorkDirGiven bool
	RootIDGiven  bool
	// Entrypoint is --entrypoint: the program run instead of the image's
	// Entrypoint and Cmd, with the arguments after --.
	Entrypoint string
	// ImageConfig is the configuration an import left in the image, nil
	// for none; imageHome the HOME of its User.
	ImageConfig *oci.Config
	imageHome   string
	// Trusted is --trusted: the user vouches for the program, so auto may
	// run it inside kbox's process and trap or rewrite say nothing.
	Trusted      bool
	Net          bool
	NetAllow     []usernet.Rule
	NetAllowHost []usernet.HostRule
	NetDenyAll   bool
	DNS          string
	Publish      []usernet.Publish
	Web          bool
	WebPort      int
	WebBind      string
	WebToken     string
	TraceFormat  string
	TraceFile    string
	Stats        bool
	Verbose      bool
	Help         bool
	// TmpSize is --tmp-size in bytes: 0 when not given (the default
	// size), TmpRAM for --tmp-size 0.
	TmpSize int64
	// Agent holds --ephemeral, --snapshot, --overlay, --audit,
	// --timeout, --report, --env (agent.go).
	Agent AgentOptions
}

// UsageError is a bad command line; kbox exits 2 on it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return &UsageError{Msg: fmt.Sprintf(format, a...)} }

const imageUsage = `usage: kbox image (-r|-R|-S) IMAGE [options] [-c CMD | -- CMD ARGS...]

Boot the Linux kernel in-process (LKL), mount IMAGE as the guest root and run
CMD (default: /bin/sh -i) against it. An image made by kbox import or kbox
pull runs as docker run would: its Entrypoint and Cmd by default (-- ARGS
replace Cmd), its Env, WorkingDir (unless -w) and User (unless -0 or
--change-id) (docs/images.md).

  -r, --root-dir IMG            mount IMG as root, nothing else
  -R, --recommended-root IMG    mount IMG with proc, sysfs, /tmp and /dev
  -S, --system-root IMG         recommended mounts plus root identity
                                (IMG may be docker://REF: kbox pull REF into
                                a temporary image, removed after the run)
  -t, --fs-type TYPE            filesystem type (default ext4)
  -p, --partition N             partition number (default 0: whole disk)
  -w, --work-dir DIR            working directory inside the guest (default /)
  -c, --command CMD             run CMD with /bin/sh -c
  -k, --cmdline ARGS            extra kernel command line (e.g. mem=64M)
  -m, --mount-opt OPT           filesystem mount option, repeatable
  -b, --bind SRC:DST[:ro]       show host directory SRC at guest DST, confined
                                to SRC (ro: read-only), repeatable
  -0, --root-id                 the guest runs as root (uid/gid 0)
      --change-id UID:GID       the guest runs as UID:GID (group GID)
      --mount-profile P         full or minimal (default full with -R/-S)
      --read-only               mount the image read-only
      --tmp-size SIZE           size of the disk behind /tmp, a sparse file
                                in $TMPDIR (else /var/tmp); K, M, G or T
                                suffix; default half the free space there,
                                64M to 8G; 0: the kernel's ramfs (a few MB)
      --syscall-mode M          auto, seccomp, trap or rewrite (default auto:
                                seccomp, which confines the program; with
                                --trusted, rewrite for a program that cannot
                                fork). trap and rewrite run the program
                                inside kbox's process: not confined
      --trusted                 the program is trusted: auto may run it
                                in-process (docs/security.md)
      --net                     networking: the guest's sockets are LKL's,
                                carried out by a user-mode stack in kbox;
                                guest 10.0.2.15, gateway 10.0.2.2 (the host's
                                127.0.0.1), DNS 10.0.2.3; IPv6: guest
                                fd00:6b62:6f78::15, gateway ::2 (the host's
                                ::1) (docs/networking.md)
      --net-allow CIDR[:PORT]   also allow a guarded destination (loopback,
                                link-local, private), e.g. 127.0.0.1:8000
      --net-allow-host NAME[:PORT]
                                also allow the addresses NAME resolves to (at
                                start, through the --dns upstream)
      --net-deny-all            allow only what --net-allow names
      --dns SERVER[:PORT]       upstream of the DNS responder (default: the
                                host's /etc/resolv.conf)
  -P, --publish [HOSTADDR:]HOSTPORT:GUESTPORT[/udp]
                                with --net: forward HOSTADDR:HOSTPORT (default
                                address 127.0.0.1) to the guest's GUESTPORT,
                                repeatable (-p is --partition)
      --web[=PORT]              web observatory (default port 8080)
      --web-bind ADDR           observatory address (default 127.0.0.1)
      --web-token TOKEN         require "Authorization: Bearer TOKEN" (or ?token=)
      --trace-format json       JSON trace of dispatched syscalls, one per line
      --trace-file PATH         write the trace to PATH (default stderr)
      --entrypoint PROG         run PROG with the arguments after -- instead of
                                an imported image's Entrypoint and Cmd
      --stats                   print a syscall summary at exit
  -v, --verbose                 show kernel messages and setup steps
  -h, --help                    this help
`

type optSpec struct {
	short, long string
	hasArg      bool
	optionalArg bool // --long[=VALUE]
	set         func(o *ImageOptions, v string, present bool) error
}

var imageOpts = []optSpec{
	{"r", "root-dir", true, false, func(o *ImageOptions, v string, _ bool) error { return o.setRoot(RootRaw, v) }},
	{"R", "recommended-root", true, false, func(o *ImageOptions, v string, _ bool) error { return o.setRoot(RootRecommended, v) }},
	{"S", "system-root", true, false, func(o *ImageOptions, v string, _ bool) error { return o.setRoot(RootSystem, v) }},
	{"t", "fs-type", true, false, func(o *ImageOptions, v string, _ bool) error { o.FSType = v; return nil }},
	{"p", "partition", true, false, func(o *ImageOptions, v string, _ bool) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 255 {
			if strings.Contains(v, ":") {
				return usagef("bad partition %q: -p is --partition (as in the C kbox); publish a port with -P/--publish [HOSTADDR:]HOSTPORT:GUESTPORT", v)
			}
			return usagef("bad partition %q: want a number 0-255", v)
		}
		o.Partition = n
		return nil
	}},
	{"w", "work-dir", true, false, func(o *ImageOptions, v string, _ bool) error {
		if !strings.HasPrefix(v, "/") {
			return usagef("work dir %q must be an absolute guest path", v)
		}
		o.WorkDir, o.WorkDirGiven = v, true
		return nil
	}},
	{"c", "command", true, false, func(o *ImageOptions, v string, _ bool) error {
		if o.Command != nil {
			return usagef("give the command once, with -c or after --")
		}
		o.Command, o.CommandFrom = []string{"/bin/sh", "-c", v}, "-c"
		return nil
	}},
	{"k", "cmdline", true, false, func(o *ImageOptions, v string, _ bool) error {
		o.Cmdline = strings.TrimSpace(o.Cmdline + " " + v)
		return nil
	}},
	{"m", "mount-opt", true, false, func(o *ImageOptions, v string, _ bool) error { o.MountOpts = append(o.MountOpts, v); return nil }},
	{"b", "bind", true, false, func(o *ImageOptions, v string, _ bool) error {
		b, err := ParseBind(v)
		if err != nil {
			return err
		}
		o.Binds = append(o.Binds, b)
		return nil
	}},
	{"0", "root-id", false, false, func(o *ImageOptions, _ string, _ bool) error { o.RootID, o.RootIDGiven = true, true; return nil }},
	{"", "change-id", true, false, func(o *ImageOptions, v string, _ bool) error {
		id, err := ParseID(v)
		if err != nil {
			return err
		}
		o.ChangeID = &id
		return nil
	}},
	{"", "mount-profile", true, false, func(o *ImageOptions, v string, _ bool) error {
		if v != "full" && v != "minimal" {
			return usagef("bad mount profile %q: want full or minimal", v)
		}
		o.MountProfile = v
		return nil
	}},
	{"", "read-only", false, false, func(o *ImageOptions, _ string, _ bool) error { o.ReadOnly = true; return nil }},
	{"", "tmp-size", true, false, func(o *ImageOptions, v string, _ bool) error {
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		if n == 0 {
			n = TmpRAM
		}
		o.TmpSize = n
		return nil
	}},
	{"", "syscall-mode", true, false, func(o *ImageOptions, v string, _ bool) error {
		switch v {
		case "auto", "seccomp", "trap", "rewrite":
			o.SyscallMode = v
			return nil
		}
		return usagef("bad syscall mode %q: want auto, seccomp, trap or rewrite", v)
	}},
	{"", "trusted", false, false, func(o *ImageOptions, _ string, _ bool) error { o.Trusted = true; return nil }},
	{"", "net", false, false, func(o *ImageOptions, _ string, _ bool) error { o.Net = true; return nil }},
	{"", "net-allow", true, false, func(o *ImageOptions, v string, _ bool) error {
		r, err := usernet.ParseRule(v)
		if err != nil {
			return usagef("%v", err)
		}
		o.NetAllow = append(o.NetAllow, r)
		return nil
	}},
	{"", "net-allow-host", true, false, func(o *ImageOptions, v string, _ bool) error {
		h, err := usernet.ParseHostRule(v)
		if err != nil {
			return usagef("%v", err)
		}
		o.NetAllowHost = append(o.NetAllowHost, h)
		return nil
	}},
	{"", "net-deny-all", false, false, func(o *ImageOptions, _ string, _ bool) error { o.NetDenyAll = true; return nil }},
	{"", "dns", true, false, func(o *ImageOptions, v string, _ bool) error {
		if v == "" {
			return usagef("empty --dns server")
		}
		o.DNS = v
		return nil
	}},
	{"P", "publish", true, false, func(o *ImageOptions, v string, _ bool) error {
		p, err := usernet.ParsePublish(v)
		if err != nil {
			return usagef("%v", err)
		}
		o.Publish = append(o.Publish, p)
		return nil
	}},
	{"", "web", false, true, func(o *ImageOptions, v string, present bool) error {
		o.Web = true
		if !present {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 {
			return usagef("bad web port %q: want 0-65535", v)
		}
		o.WebPort = n
		return nil
	}},
	{"", "web-bind", true, false, func(o *ImageOptions, v string, _ bool) error {
		if v == "" {
			return usagef("empty --web-bind address")
		}
		o.WebBind = v
		return nil
	}},
	{"", "web-token", true, false, func(o *ImageOptions, v string, _ bool) error {
		if v == "" {
			return usagef("empty --web-token")
		}
		o.WebToken = v
		return nil
	}},
	{"", "trace-format", true, false, func(o *ImageOptions, v string, _ bool) error {
		if v != "json" {
			return usagef("bad trace format %q: want json", v)
		}
		o.TraceFormat = v
		return nil
	}},
	{"", "trace-file", true, false, func(o *ImageOptions, v string, _ bool) error {
		if v == "" {
			return usagef("empty --trace-file path")
		}
		o.TraceFile = v
		return nil
	}},
	{"", "entrypoint", true, false, func(o *ImageOptions, v string, _ bool) error {
		if v == "" {
			return usagef("empty --entrypoint")
		}
		o.Entrypoint = v
		return nil
	}},
	{"", "stats", false, false, func(o *ImageOptions, _ string, _ bool) error { o.Stats = true; return nil }},
	{"v", "verbose", false, false, func(o *ImageOptions, _ string, _ bool) error { o.Verbose = true; return nil }},
	{"h", "help", false, false, func(o *ImageOptions, _ string, _ bool) error { o.Help = true; return nil }},
}

func (o *ImageOptions) setRoot(m RootMode, img string) error {
	if o.Image != "" {
		return usagef("give one image, with one of -r, -R or -S")
	}
	if img == "" {
		return usagef("empty image path")
	}
	o.Image, o.Mode = img, m
	return nil
}

func findOpt(short, long string) *optSpec {
	for i := range imageOpts {
		s := &imageOpts[i]
		if (short != "" && s.short == short) || (long != "" && s.long == long) {
			return s
		}
	}
	return nil
}

// ParseImageArgs parses the arguments after `kbox image`.
func ParseImageArgs(args []string) (*ImageOptions, error) {
	o := &ImageOptions{WebPort: 8080, WebBind: "127.0.0.1", SyscallMode: "auto", FSType: "ext4", WorkDir: "/"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if o.Command != nil {
				return nil, usagef("give the command once, with -c or after --")
			}
			o.Command, o.CommandFrom = append([]string{}, args[i+1:]...), "--"
			if len(o.Command) == 0 {
				return nil, usagef("no command after --")
			}
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			s := findOpt("", name)
			if s == nil {
				return nil, usagef("unknown option --%s (see kbox image --help)", name)
			}
			switch {
			case s.optionalArg:
			case s.hasArg && !hasVal:
				if i+1 >= len(args) {
					return nil, usagef("option --%s needs a value", name)
				}
				i++
				val, hasVal = args[i], true
			case !s.hasArg && hasVal:
				return nil, usagef("option --%s takes no value", name)
			}
			if err := s.set(o, val, hasVal); err != nil {
				return nil, err
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// Short options may be grouped (-0v); one taking a value ends
			// the group, its value attached (-Simg) or in the next word.
			for j := 1; j < len(a); j++ {
				s := findOpt(a[j:j+1], "")
				if s == nil {
					return nil, usagef("unknown option -%s (see kbox image --help)", a[j:j+1])
				}
				if !s.hasArg {
					if err := s.set(o, "", false); err != nil {
						return nil, err
					}
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return nil, usagef("option -%s needs a value", s.short)
					}
					i++
					val = args[i]
				}
				if err := s.set(o, val, true); err != nil {
					return nil, err
				}
				break
			}
		default:
			return nil, usagef("unexpected argument %q: put the command after -- or use -c", a)
		}
	}
	if o.Help {
		return o, nil
	}
	if o.Image == "" {
		return nil, usagef("no image: give one with -r, -R or -S")
	}
	if o.Mode == RootSystem {
		o.RootID = true
	}
	if o.RootID && o.ChangeID != nil {
		return nil, usagef("--change-id conflicts with -0/-S root identity")
	}
	if o.TraceFile != "" && o.TraceFormat == "" {
		o.TraceFormat = "json" // the only format
	}
	if o.TmpSize != 0 && (o.MountProfile == "minimal" || o.Mode == RootRaw && o.MountProfile != "full") {
		return nil, usagef("--tmp-size needs a /tmp: use -R, -S or --mount-profile full")
	}
	if o.WebToken != "" && !o.Web {
		return nil, usagef("--web-token needs --web")
	}
	if o.Entrypoint != "" {
		if o.CommandFrom == "-c" {
			return nil, usagef("--entrypoint takes its arguments after --, not -c")
		}
		o.Command = append([]string{o.Entrypoint}, o.Command...)
		o.CommandFrom = "--entrypoint"
	}
	if o.Command == nil {
		o.Command = []string{"/bin/sh", "-i"}
	}
	for _, w := range strings.Fields(o.Cmdline) {
		if v, ok := strings.CutPrefix(w, "mem="); ok {
			if n, err := ParseSize(v); err != nil || n < minKernelMem {
				return nil, usagef("-k mem=%s: the kernel needs at least %dM (with less, LKL panics as it boots)", v, minKernelMem>>20)
			}
		}
	}
	return o, nil
}

// minKernelMem is the least memory kbox boots LKL with: 6M panicked at
// boot (out of memory), 8M ran a shell.
const minKernelMem = 8 << 20

// ParseBind parses SRC:DST[:ro]. SRC is a host path; DST a guest path.
func ParseBind(spec string) (Bind, error) {
	parts := strings.Split(spec, ":")
	var b Bind
	switch len(parts) {
	case 2:
	case 3:
		if parts[2] != "ro" && parts[2] != "rw" {
			return b, usagef("bad bind %q: the third field must be ro or rw", spec)
		}
		b.ReadOnly = parts[2] == "ro"
	default:
		return b, usagef("bad bind %q: want SRC:DST[:ro]", spec)
	}
	b.Src, b.Dst = parts[0], parts[1]
	if b.Src == "" || b.Dst == "" {
		return b, usagef("bad bind %q: empty source or destination", spec)
	}
	if !strings.HasPrefix(b.Dst, "/") {
		return b, usagef("bad bind %q: destination must be an absolute guest path", spec)
	}
	if strings.ContainsRune(spec, 0) {
		return b, usagef("bad bind %q: NUL byte", spec)
	}
	for _, c := range strings.Split(b.Dst, "/") {
		if c == ".." {
			return b, usagef("bad bind %q: destination may not contain ..", spec)
		}
	}
	return b, nil
}

// TmpRAM is ImageOptions.TmpSize for --tmp-size 0: no scratch disk.
const TmpRAM = -1

// ParseSize parses a --tmp-size: a byte count with an optional K, M, G or
// T suffix (powers of 1024). 0 is allowed; otherwise it must lie within
// what the scratch formatter makes.
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 't', 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			num = s[:n-1]
		}
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || num == "" || num[0] == '+' {
		return 0, usagef("bad size %q: want a number of bytes with an optional K, M, G or T suffix", s)
	}
	if n == 0 {
		return 0, nil
	}
	if n > uint64(scratchfs.MaxSize/mult) || int64(n)*mult < scratchfs.MinSize {
		return 0, usagef("bad size %q: want 0 or 1M to 1T", s)
	}
	return int64(n) * mult, nil
}

// ParseID parses UID:GID.
func ParseID(s string) (ID, error) {
	u, g, ok := strings.Cut(s, ":")
	if !ok {
		return ID{}, usagef("bad id %q: want UID:GID", s)
	}
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if err := errors.Join(err1, err2); err != nil || uid == 1<<32-1 || gid == 1<<32-1 {
		return ID{}, usagef("bad id %q: want numeric UID:GID below 4294967295", s)
	}
	return ID{UID: uint32(uid), GID: uint32(gid)}, nil
}
