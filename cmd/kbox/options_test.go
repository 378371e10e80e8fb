package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/trap"
)

func TestParseImageArgs(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		check func(o *ImageOptions) bool
		err   string
	}{
		{"system root default command", []string{"-S", "a.ext4"}, func(o *ImageOptions) bool {
			return o.Image == "a.ext4" && o.Mode == RootSystem && o.RootID && reflect.DeepEqual(o.Command, []string{"/bin/sh", "-i"})
		}, ""},
		{"command after --", []string{"-R", "a.ext4", "--", "/bin/ls", "-l", "--", "x"}, func(o *ImageOptions) bool {
			return o.Mode == RootRecommended && !o.RootID && reflect.DeepEqual(o.Command, []string{"/bin/ls", "-l", "--", "x"})
		}, ""},
		{"-c", []string{"-r", "a", "-c", "echo hi | wc"}, func(o *ImageOptions) bool {
			return o.Mode == RootRaw && reflect.DeepEqual(o.Command, []string{"/bin/sh", "-c", "echo hi | wc"})
		}, ""},
		{"attached short value", []string{"-Sa.ext4", "-p2", "-t", "ext2"}, func(o *ImageOptions) bool {
			return o.Image == "a.ext4" && o.Partition == 2 && o.FSType == "ext2"
		}, ""},
		{"long with =", []string{"--system-root=a", "--syscall-mode=seccomp", "--web=9000", "--web-bind", "0.0.0.0"}, func(o *ImageOptions) bool {
			return o.SyscallMode == "seccomp" && o.Web && o.WebPort == 9000 && o.WebBind == "0.0.0.0"
		}, ""},
		{"web default port", []string{"-S", "a", "--web"}, func(o *ImageOptions) bool { return o.Web && o.WebPort == 8080 }, ""},
		{"repeatable", []string{"-S", "a", "-m", "noatime", "-m", "data=ordered", "-b", "/h:/g", "-b", "/x:/y:ro", "-k", "mem=64M", "-k", "lpj=1"}, func(o *ImageOptions) bool {
			return len(o.MountOpts) == 2 && len(o.Binds) == 2 && o.Binds[1].ReadOnly && o.Cmdline == "mem=64M lpj=1"
		}, ""},
		{"grouped flags", []string{"-0v", "-R", "a"}, func(o *ImageOptions) bool { return o.RootID && o.Verbose }, ""},
		{"change id", []string{"-R", "a", "--change-id", "1000:100"}, func(o *ImageOptions) bool {
			return o.ChangeID != nil && *o.ChangeID == ID{1000, 100}
		}, ""},
		{"read-only profile", []string{"-R", "a", "--read-only", "--mount-profile", "minimal", "-w", "/tmp"}, func(o *ImageOptions) bool {
			return o.ReadOnly && o.MountProfile == "minimal" && o.WorkDir == "/tmp"
		}, ""},
		{"help", []string{"-h"}, func(o *ImageOptions) bool { return o.Help }, ""},
		{"no image", []string{"--", "/bin/true"}, nil, "no image"},
		{"two images", []string{"-S", "a", "-R", "b"}, nil, "one image"},
		{"unknown long", []string{"--nope"}, nil, "unknown option --nope"},
		{"unknown short", []string{"-Z"}, nil, "unknown option -Z"},
		{"missing value", []string{"-S"}, nil, "needs a value"},
		{"flag with value", []string{"-S", "a", "--read-only=yes"}, nil, "takes no value"},
		{"bad mode", []string{"-S", "a", "--syscall-mode", "fast"}, nil, "bad syscall mode"},
		{"bad port", []string{"-S", "a", "--web=99999"}, nil, "bad web port"},
		{"bad partition", []string{"-S", "a", "-p", "x"}, nil, "bad partition"},
		{"partition is no publish", []string{"-S", "a", "-p", "8080:80"}, nil, "publish a port with -P/--publish"},
		{"publish", []string{"-S", "a", "--net", "-P", "8080:80", "--publish", "0.0.0.0:5353:53/udp"}, func(o *ImageOptions) bool {
			return len(o.Publish) == 2 && o.Publish[0].String() == "127.0.0.1:8080:80" && o.Publish[1].UDP
		}, ""},
		{"bad publish", []string{"-S", "a", "--net", "-P", "8080"}, nil, "want two ports"},
		{"relative workdir", []string{"-S", "a", "-w", "tmp"}, nil, "absolute"},
		{"stray argument", []string{"-S", "a", "ls"}, nil, "unexpected argument"},
		{"empty --", []string{"-S", "a", "--"}, nil, "no command"},
		{"-c and --", []string{"-S", "a", "-c", "x", "--", "y"}, nil, "command once"},
		{"root id conflicts", []string{"-S", "a", "--change-id", "1:1"}, nil, "conflicts"},
		{"bad trace", []string{"-S", "a", "--trace-format", "xml"}, nil, "bad trace format"},
		{"observatory options", []string{"-S", "a", "--web=0", "--web-token", "s3", "--trace-file", "/tmp/t.json", "--stats"}, func(o *ImageOptions) bool {
			return o.Web && o.WebPort == 0 && o.WebToken == "s3" && o.TraceFormat == "json" && o.TraceFile == "/tmp/t.json" && o.Stats
		}, ""},
		{"token without web", []string{"-S", "a", "--web-token", "s3"}, nil, "needs --web"},
		{"empty token", []string{"-S", "a", "--web", "--web-token="}, nil, "empty --web-token"},
		{"empty bind address", []string{"-S", "a", "--web", "--web-bind="}, nil, "empty --web-bind"},
		{"tmp size default", []string{"-S", "a"}, func(o *ImageOptions) bool { return o.TmpSize == 0 }, ""},
		{"tmp size", []string{"-S", "a", "--tmp-size", "512M"}, func(o *ImageOptions) bool { return o.TmpSize == 512<<20 }, ""},
		{"tmp size ramfs", []string{"-R", "a", "--tmp-size=0"}, func(o *ImageOptions) bool { return o.TmpSize == TmpRAM }, ""},
		{"tmp size full profile", []string{"-r", "a", "--mount-profile", "full", "--tmp-size", "1g"}, func(o *ImageOptions) bool { return o.TmpSize == 1<<30 }, ""},
		{"tmp size without /tmp", []string{"-r", "a", "--tmp-size", "1G"}, nil, "--tmp-size needs a /tmp"},
		{"tmp size minimal", []string{"-S", "a", "--mount-profile", "minimal", "--tmp-size", "1G"}, nil, "--tmp-size needs a /tmp"},
		{"bad tmp size", []string{"-S", "a", "--tmp-size", "lots"}, nil, "bad size"},
		{"kernel memory too small", []string{"-S", "a", "-k", "mem=4M"}, nil, "needs at least 8M"},
		{"kernel memory junk", []string{"-S", "a", "-k", "lpj=1 mem=lots"}, nil, "needs at least 8M"},
		{"kernel memory enough", []string{"-S", "a", "-k", "mem=8M"}, func(o *ImageOptions) bool { return o.Cmdline == "mem=8M" }, ""},
		{"entrypoint", []string{"-S", "a", "--entrypoint", "/bin/x", "--", "y"}, func(o *ImageOptions) bool {
			return reflect.DeepEqual(o.Command, []string{"/bin/x", "y"}) && o.CommandFrom == "--entrypoint"
		}, ""},
		{"entrypoint and -c", []string{"-S", "a", "--entrypoint", "/bin/x", "-c", "y"}, nil, "not -c"},
		{"empty entrypoint", []string{"-S", "a", "--entrypoint="}, nil, "empty --entrypoint"},
		{"how the command came", []string{"-S", "a", "-0", "-w", "/x"}, func(o *ImageOptions) bool {
			return o.CommandFrom == "" && o.RootIDGiven && o.WorkDirGiven
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseImageArgs(c.args)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				if _, ok := err.(*UsageError); !ok {
					t.Errorf("err %T is not a UsageError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(o) {
				t.Errorf("parsed %+v", o)
			}
		})
	}
}

func TestParseBind(t *testing.T) {
	cases := []struct {
		spec string
		want Bind
		err  string
	}{
		{"/host/dir:/guest", Bind{"/host/dir", "/guest", false}, ""},
		{"rel:/guest:ro", Bind{"rel", "/guest", true}, ""},
		{"/h:/g:rw", Bind{"/h", "/g", false}, ""},
		{"/h", Bind{}, "want SRC:DST"},
		{"/h:/g:rx", Bind{}, "ro or rw"},
		{":/g", Bind{}, "empty"},
		{"/h:", Bind{}, "empty"},
		{"/h:g", Bind{}, "absolute"},
		{"/h:/g/../../etc", Bind{}, "may not contain .."},
		{"/a:/b:ro:x", Bind{}, "want SRC:DST"},
	}
	for _, c := range cases {
		b, err := ParseBind(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || b != c.want {
			t.Errorf("%q: %+v %v", c.spec, b, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"0G", 0, ""},
		{"1048576", 1 << 20, ""},
		{"1024K", 1 << 20, ""},
		{"64M", 64 << 20, ""},
		{"64m", 64 << 20, ""},
		{"8G", 8 << 30, ""},
		{"1T", 1 << 40, ""},
		{"1025G", 0, "1M to 1T"},
		{"1023K", 0, "1M to 1T"},
		{"100", 0, "1M to 1T"},
		{"99999999999999999999", 0, "bad size"},
		{"9223372036854775807K", 0, "1M to 1T"},
		{"", 0, "bad size"},
		{"G", 0, "bad size"},
		{"-1G", 0, "bad size"},
		{"+1G", 0, "bad size"},
		{"1.5G", 0, "bad size"},
		{"1GB", 0, "bad size"},
		{"1 G", 0, "bad size"},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if c.err != "" {
			if _, ok := err.(*UsageError); !ok || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseSize(%q) = %d, %v; want a usage error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseID(t *testing.T) {
	for s, ok := range map[string]bool{"0:0": true, "1000:100": true, "x:1": false, "1": false, "-1:0": false, "4294967295:0": false} {
		if _, err := ParseID(s); (err == nil) != ok {
			t.Errorf("%q: err %v", s, err)
		}
	}
}

func FuzzParseImageArgs(f *testing.F) {
	f.Add("-S\x00a.ext4\x00--\x00/bin/sh")
	f.Add("--web=1\x00-b\x00/a:/b:ro")
	f.Fuzz(func(t *testing.T, s string) {
		ParseImageArgs(strings.Split(s, "\x00")) // never panics
	})
}

func TestUnsupportedOptionsRefused(t *testing.T) {
	// --net runs in every tier (docs/networking.md): accepted in trap
	// and rewrite where this build has them, and auto decides per
	// program as without it.
	for _, mode := range []string{"trap", "rewrite"} {
		o, err := ParseImageArgs([]string{"-S", "a", "--net", "--syscall-mode=" + mode, "--", "/bin/true"})
		if err != nil {
			t.Fatal(err)
		}
		if err := unsupported(o); (err == nil) != trap.Available() || err != nil && strings.Contains(err.Error(), "--net") {
			t.Errorf("--net --syscall-mode=%s: %v, tier available: %v", mode, err, trap.Available())
		}
	}
	o, err := ParseImageArgs([]string{"-S", "a", "--net", "--trusted", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := unsupported(o); err != nil || trap.Available() && (o.SyscallMode != "auto" || strings.Contains(o.TierWhy, "--net")) {
		t.Errorf("--net with auto: %v, mode %s (%s)", err, o.SyscallMode, o.TierWhy)
	}
	o, err = ParseImageArgs([]string{"-S", "a", "--syscall-mode=rewrite", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := unsupported(o); (err == nil) != trap.Available() {
		t.Errorf("--syscall-mode=rewrite: %v, tier available: %v", err, trap.Available())
	}
	// The trap tier is refused only where this build lacks it (not
	// linux/amd64 with cgo).
	o, err = ParseImageArgs([]string{"-S", "a", "--syscall-mode=trap", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := unsupported(o); (err == nil) != trap.Available() {
		t.Errorf("--syscall-mode=trap: %v, tier available: %v", err, trap.Available())
	}
}

// TestKernelMemMB: the kernel's memory that bounds the guest's internet
// sockets (inetMax), from mem= (the last one, as the kernel reads it) or
// the default.
func TestKernelMemMB(t *testing.T) {
	for _, c := range []struct {
		cfg  lkl.Config
		want int
	}{
		{lkl.Config{}, lkl.DefaultMemMB},
		{lkl.Config{MemMB: 128}, 128},
		{lkl.Config{MemMB: 128, Cmdline: "mem=512M"}, 512},
		{lkl.Config{Cmdline: "lpj=1 mem=1G"}, 1024},
		{lkl.Config{Cmdline: "mem=64M mem=256M"}, 256},
		{lkl.Config{Cmdline: "mem=65536k"}, 64},
		{lkl.Config{Cmdline: "mem=268435456"}, 256},
		{lkl.Config{MemMB: 64, Cmdline: "mem=junk"}, 64},
		{lkl.Config{MemMB: 64, Cmdline: "mem= mem=-5M mem=100k"}, 64},
		{lkl.Config{Cmdline: "nomem=1G"}, lkl.DefaultMemMB},
	} {
		if got := kernelMemMB(c.cfg); got != c.want {
			t.Errorf("%+v: %d, want %d", c.cfg, got, c.want)
		}
	}
	if got := inetMax(&ImageOptions{Net: true}); got != 128*inetPerMB {
		t.Errorf("--net: %d sockets, want %d", got, 128*inetPerMB)
	}
}

// TestAutoConfinesUnlessTrusted: auto, the default, runs a program
// nobody vouched for in the seccomp tier; --trusted lets it decide per
// program (the in-process rewrite tier where this build has it); an
// in-process tier asked for without --trusted is warned about.
func TestAutoConfinesUnlessTrusted(t *testing.T) {
	for _, c := range []struct {
		args     []string
		mode     string // after unsupported
		why      string
		warnMode string // notConfined's mode, "" for no warning
	}{
		{[]string{}, "seccomp", autoUntrusted, ""},
		{[]string{"--syscall-mode=auto"}, "seccomp", autoUntrusted, ""},
		{[]string{"--trusted"}, "auto", "", ""},
		{[]string{"--syscall-mode=seccomp"}, "seccomp", "", ""},
		{[]string{"--syscall-mode=trap"}, "trap", "", "trap"},
		{[]string{"--syscall-mode=rewrite"}, "rewrite", "", "rewrite"},
		{[]string{"--syscall-mode=rewrite", "--trusted"}, "rewrite", "", ""},
	} {
		o, err := ParseImageArgs(append(append([]string{"-S", "a"}, c.args...), "--", "/bin/true"))
		if err != nil {
			t.Fatal(err)
		}
		err = unsupported(o)
		if !trap.Available() {
			if inProcess(c.mode) != (err != nil) {
				t.Errorf("%v: %v on a build without the in-process tiers", c.args, err)
			}
			continue
		}
		if err != nil || o.SyscallMode != c.mode || o.TierWhy != c.why {
			t.Errorf("%v: %v, mode %q (%q), want %q (%q)", c.args, err, o.SyscallMode, o.TierWhy, c.mode, c.why)
		}
		if warn := inProcess(o.SyscallMode) && !o.Trusted; warn != (c.warnMode != "") {
			t.Errorf("%v: warned %v", c.args, warn)
		}
	}
	if w := notConfined("trap"); !strings.Contains(w, "not confined") || !strings.Contains(w, "--trusted") {
		t.Errorf("notConfined: %q", w)
	}
}
