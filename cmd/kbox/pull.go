package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kbox-project/kbox/oci"
	"github.com/kbox-project/kbox/scratchfs"
	"golang.org/x/sys/unix"
)

const pullUsage = `usage: kbox pull [options] REF [-o OUT.ext4] | kbox pull --prune

Pull an image from a registry (Docker Hub, GHCR, any distribution v2
registry) into kbox's blob cache ($XDG_CACHE_HOME/kbox, else
~/.cache/kbox), every blob checked against its digest, and with -o make
an ext4 image of it as kbox import does (docs/images.md). REF is
[REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST], e.g. alpine:3.20 or
ghcr.io/org/img@sha256:... A registry on the loopback is spoken to in
HTTPS if it answers in it, else in plain HTTP; any other in HTTPS.
Credentials come from Docker's
config.json ($DOCKER_CONFIG, else ~/.docker) when it has some for the
registry (a user and password, or an identity token); otherwise kbox
pulls anonymously (with a token when the registry asks for one). A
registry's own CA (*.crt) and client certificate (NAME.cert, NAME.key)
are read from --cert-dir, else from the registry's directory (HOST or
HOST:PORT) in containers/certs.d of $XDG_CONFIG_HOME (else ~/.config),
/etc/containers/certs.d or /etc/docker/certs.d. A download cut short is
resumed by the next pull.

  -o, --output OUT         the image file to make (replaced if it exists)
      --size SIZE          filesystem size (K, M, G or T suffix; default:
                           the content plus headroom)
      --platform OS/ARCH   the platform to take from a multi-platform
                           image (default: the host's)
      --cert-dir DIR       the registry's CA and client certificates
      --prune              remove the cached blobs no pulled image uses
  -v, --verbose            a line per step
  -h, --help               this help
`

func runPull(args []string) int {
	prune := false
	certDir := ""
	a, err := parseBuildArgs(args, func(name, _ string, next func() (string, error)) (bool, error) {
		switch name {
		case "--prune":
			prune = true
			return true, nil
		case "--cert-dir":
			d, err := next()
			if err == nil && d == "" {
				err = usagef("--cert-dir: want a directory")
			}
			certDir = d
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return fail(err)
	}
	if a.help {
		fmt.Print(pullUsage)
		return 0
	}
	if prune {
		if len(a.rest) != 0 || a.out != "" {
			return fail(usagef("--prune takes no image\n%s", pullUsage))
		}
		n, size, err := oci.Prune("")
		if err != nil {
			return fail(fmt.Errorf("--prune: %w", err))
		}
		fmt.Fprintf(os.Stderr, "kbox: removed %d blobs (%.1f MB) from the cache\n", n, float64(size)/1e6)
		return 0
	}
	if len(a.rest) != 1 {
		return fail(usagef("give one image reference\n%s", pullUsage))
	}
	ref, err := oci.ParseRef(a.rest[0])
	if err != nil {
		return fail(usagef("%v", err))
	}
	_, terr := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS)
	im, err := oci.Pull(ref, oci.PullOptions{
		Platform: a.platform, Explicit: a.explicit,
		Progress: os.Stderr, Terminal: terr == nil, CertDir: certDir,
	})
	if err != nil {
		return fail(err)
	}
	defer im.Close()
	if a.out == "" {
		fmt.Fprintf(os.Stderr, "kbox: %s is in the cache; make an image of it with kbox pull %s -o OUT.ext4\n", ref, a.rest[0])
		return 0
	}
	return buildImage(im, a)
}

// dockerPrefix marks an image given as a registry reference:
// `kbox image -S docker://REF` pulls REF (through the cache) into a
// temporary image, runs the guest on it, and removes it.
const dockerPrefix = "docker://"

// pullForRun pulls o.Image's reference into a temporary image made by a
// `kbox pull` child (the kernel boots once per process: the build's boot
// cannot be the run's), points o.Image at it, and returns what removes it.
func pullForRun(o *ImageOptions) (func(), error) {
	ref := strings.TrimPrefix(o.Image, dockerPrefix)
	if _, err := oci.ParseRef(ref); err != nil {
		return nil, usagef("%v", err)
	}
	dir, err := os.MkdirTemp(scratchfs.Dirs()[0], "kbox-docker-")
	if err != nil {
		return nil, fmt.Errorf("%s: a directory for the image: %w", o.Image, err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	exe, err := os.Executable()
	if err != nil {
		cleanup()
		return nil, err
	}
	out := filepath.Join(dir, "image.ext4")
	cmd := exec.Command(exe, "pull", ref, "-o", out)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == exitUsage {
			return nil, usagef("%s: the pull failed (above)", o.Image)
		}
		return nil, fmt.Errorf("%s: the pull failed (above): %w", o.Image, err)
	}
	o.Image = out
	return cleanup, nil
}
