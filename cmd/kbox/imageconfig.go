package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
)

// An image made by kbox import or kbox pull carries its configuration
// (rootfs.ReadImageConfig). What the command line leaves out, it fills in
// as `docker run IMAGE` would: with no command, Entrypoint then Cmd; with
// `-- ARGS`, Entrypoint then ARGS (ARGS replace Cmd); -c CMD runs
// /bin/sh -c CMD alone, --entrypoint PROG PROG and the ARGS. WorkingDir unless -w, Env over kbox's clean
// environment, and User unless -0 or --change-id.

// applyImageConfig reads the image's configuration, if it has one, and
// sets the command and work dir from it. The user is resolved after boot
// (applyImageUser), through the image's /etc/passwd.
func applyImageConfig(o *ImageOptions) error {
	c, err := rootfs.ReadImageConfig(o.Image)
	if err != nil || c.Empty() {
		return err
	}
	o.ImageConfig = c
	switch o.CommandFrom {
	case "":
		if argv := append(append([]string{}, c.Entrypoint...), c.Cmd...); len(argv) > 0 {
			o.Command = argv
		}
	case "--":
		if len(c.Entrypoint) > 0 {
			o.Command = append(append([]string{}, c.Entrypoint...), o.Command...)
		}
	}
	if !o.WorkDirGiven && strings.HasPrefix(c.WorkingDir, "/") {
		o.WorkDir = c.WorkingDir
	}
	return nil
}

// imagePathVar is the PATH the image's Env sets, or kbox's.
func imagePathVar(o *ImageOptions) string {
	if o.ImageConfig != nil {
		for _, kv := range o.ImageConfig.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				return v
			}
		}
	}
	return guestPath
}

// imageEnv lays the image's Env (and the image user's HOME) over env.
func imageEnv(o *ImageOptions, env []string) []string {
	if o.ImageConfig == nil {
		return env
	}
	if o.imageHome != "" {
		env = withEnv(env, []string{"HOME=" + o.imageHome})
	}
	return withEnv(env, o.ImageConfig.Env)
}

// applyImageUser runs the guest as the image's User, unless the command
// line chose an identity. The kernel is up, chrooted in the image.
func applyImageUser(o *ImageOptions) error {
	if o.ImageConfig == nil || o.ImageConfig.User == "" || o.RootIDGiven || o.ChangeID != nil {
		return nil
	}
	passwd, _ := lkl.ReadFile("/etc/passwd")
	group, _ := lkl.ReadFile("/etc/group")
	u, err := resolveUser(o.ImageConfig.User, string(passwd), string(group))
	if err != nil {
		return fmt.Errorf("the image's User %q: %w", o.ImageConfig.User, err)
	}
	o.imageHome = u.home
	if u.uid == 0 && u.gid == 0 {
		o.RootID = true
		return nil
	}
	o.RootID = false
	o.ChangeID = &ID{UID: u.uid, GID: u.gid}
	return nil
}

type imageUser struct {
	uid, gid uint32
	home     string
}

// resolveUser resolves USER[:GROUP] (names or numbers) as container
// runtimes do: a name through /etc/passwd (and /etc/group), a number as
// it is; without GROUP, the user's primary group from /etc/passwd, or 0.
func resolveUser(spec, passwd, group string) (imageUser, error) {
	var u imageUser
	user, grp, hasGroup := strings.Cut(spec, ":")
	found := false
	if n, err := strconv.ParseUint(user, 10, 32); err == nil {
		u.uid = uint32(n)
		if f := findEntry(passwd, 2, user); f != nil {
			found = true
			u.gid, u.home = parseID(f[3]), f[5]
		}
	} else {
		f := findEntry(passwd, 0, user)
		if f == nil {
			return u, fmt.Errorf("no user %q in the image's /etc/passwd", user)
		}
		found = true
		u.uid, u.gid, u.home = parseID(f[2]), parseID(f[3]), f[5]
	}
	if !found {
		u.gid = 0
	}
	if hasGroup {
		if n, err := strconv.ParseUint(grp, 10, 32); err == nil {
			u.gid = uint32(n)
		} else {
			f := findEntry(group, 0, grp)
			if f == nil {
				return u, fmt.Errorf("no group %q in the image's /etc/group", grp)
			}
			u.gid = parseID(f[2])
		}
	}
	return u, nil
}

// findEntry finds the line of a passwd or group file whose field col is
// val, split in at least 7 (passwd) or 4 (group) fields.
func findEntry(file string, col int, val string) []string {
	for _, l := range strings.Split(file, "\n") {
		f := strings.Split(l, ":")
		if len(f) < 4 || f[col] != val {
			continue
		}
		for len(f) < 7 {
			f = append(f, "")
		}
		return f
	}
	return nil
}

func parseID(s string) uint32 {
	n, _ := strconv.ParseUint(s, 10, 32)
	return uint32(n)
}
