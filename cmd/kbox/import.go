package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/oci"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

const importUsage = `usage: kbox import [options] FILE|DIR [--ref NAME] -o OUT.ext4

Make an ext4 image from a container image: a docker save tarball, an OCI
image layout (a directory, or a tar of one) or a plain root filesystem
tarball (tar, tar.gz or tar.zst). The layers are applied through kbox's
kernel, with no root: owners, modes, device nodes, extended attributes
and whiteouts are as the layers say. The image's Env, WorkingDir, User,
Entrypoint and Cmd are kept in OUT (after its filesystem) and become
kbox image's defaults for it (docs/images.md). A docker save or OCI
layout holding several images needs --ref to say which.

  -o, --output OUT         the image file to make (replaced if it exists)
      --size SIZE          filesystem size (K, M, G or T suffix; default:
                           the content plus headroom)
      --platform OS/ARCH   the platform to take from a multi-platform
                           layout (default: the host's)
      --ref NAME           the image to take from a docker save or OCI
                           layout holding several: a tag of its RepoTags,
                           or its org.opencontainers.image.ref.name
  -v, --verbose            a line per step
  -h, --help               this help
`

// buildArgs are the options import and pull share.
type buildArgs struct {
	out      string
	size     int64
	platform oci.Platform
	explicit bool
	verbose  bool
	help     bool
	rest     []string
}

// parseBuildArgs parses import's and pull's options; extra handles the
// options only one of them has (it returns false for an unknown one).
func parseBuildArgs(args []string, extra func(name, val string, next func() (string, error)) (bool, error)) (*buildArgs, error) {
	a := &buildArgs{}
	for i := 0; i < len(args); i++ {
		v := args[i]
		name, val, hasVal := strings.Cut(v, "=")
		next := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", usagef("option %s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case name == "-o" || name == "--output":
			a.out, err = next()
		case name == "--size":
			var s string
			if s, err = next(); err == nil {
				if a.size, err = ParseSize(s); err == nil && a.size <= 0 {
					err = usagef("--size %s: want a positive size", s)
				}
			}
		case name == "--platform":
			var s string
			if s, err = next(); err == nil {
				if a.platform, err = oci.ParsePlatform(s); err != nil {
					err = usagef("--platform: %v", err)
				}
				a.explicit = true
			}
		case v == "-v" || v == "--verbose":
			a.verbose = true
		case v == "-h" || v == "--help":
			a.help = true
		case strings.HasPrefix(v, "-") && v != "-":
			ok := false
			if extra != nil {
				ok, err = extra(name, val, next)
			}
			if !ok && err == nil {
				err = usagef("unknown option %s", name)
			}
		default:
			a.rest = append(a.rest, v)
		}
		if err != nil {
			return nil, err
		}
	}
	if !a.explicit {
		a.platform = oci.HostPlatform()
	}
	return a, nil
}

func runImport(args []string) int {
	ref := ""
	a, err := parseBuildArgs(args, func(name, _ string, next func() (string, error)) (bool, error) {
		if name != "--ref" {
			return false, nil
		}
		r, err := next()
		if err == nil && r == "" {
			err = usagef("--ref: want an image name, e.g. alpine:3.20")
		}
		ref = r
		return true, err
	})
	if err != nil {
		return fail(err)
	}
	if a.help {
		fmt.Print(importUsage)
		return 0
	}
	if len(a.rest) != 1 || a.out == "" {
		return fail(usagef("give one FILE or DIR and -o OUT.ext4\n%s", importUsage))
	}
	im, err := oci.Open(a.rest[0], oci.Options{Platform: a.platform, Explicit: a.explicit, Ref: ref})
	var ce *oci.ChoiceError
	if errors.As(err, &ce) {
		return fail(usagef("%v", err))
	}
	if err != nil {
		return fail(err)
	}
	defer im.Close()
	return buildImage(im, a)
}

// buildImage builds OUT from an opened image (import and pull).
func buildImage(im *oci.Image, a *buildArgs) int {
	if !lkl.Available {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", lkl.ErrNotBuilt)
		return exitUsage
	}
	// An interrupted build leaves no file behind. The signal's goroutine
	// ends kbox: once it has begun, the build's own failure (its file
	// gone under it) is not reported, nor its status returned.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	var stopping atomic.Bool
	go func() {
		s := <-sig
		stopping.Store(true)
		rootfs.RemoveBuildTemp()
		fmt.Fprintf(os.Stderr, "kbox: %v: stopped, %s not made\n", s, a.out)
		os.Exit(128 + int(s.(unix.Signal)))
	}()
	opt := rootfs.BuildOptions{Out: a.out, Size: a.size}
	if a.verbose {
		opt.Log = os.Stderr
	}
	if err := rootfs.Build(im, opt); err != nil {
		if stopping.Load() {
			select {} // the signal's goroutine exits
		}
		return fail(err)
	}
	signal.Stop(sig)
	if a.verbose {
		fmt.Fprintf(os.Stderr, "kbox: made %s from %s\n", a.out, im.Source)
	}
	return 0
}
