package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSplitOpenArgs: DIR is the one word of kbox session open that is
// neither an option nor an option's value, however the options are
// written.
func TestSplitOpenArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		dir  string
		opts []string
		bad  bool
	}{
		{args: []string{"-S", "img", "d"}, dir: "d", opts: []string{"-S", "img"}},
		{args: []string{"-Simg", "d", "--net"}, dir: "d", opts: []string{"-Simg", "--net"}},
		{args: []string{"d", "-S", "img", "-w", "/src", "--env", "A=B"}, dir: "d", opts: []string{"-S", "img", "-w", "/src", "--env", "A=B"}},
		{args: []string{"--policy=p.toml", "-S", "img", "d"}, dir: "d", opts: []string{"--policy=p.toml", "-S", "img"}},
		{args: []string{"-S", "img", "--policy", "p.toml", "d"}, dir: "d", opts: []string{"-S", "img", "--policy", "p.toml"}},
		{args: []string{"-S", "img"}, bad: true},
		{args: []string{"-S", "img", "d", "e"}, bad: true},
		{args: []string{"-S", "img", "d", "--", "sh"}, bad: true},
	} {
		dir, opts, err := splitOpenArgs(c.args)
		if c.bad {
			if err == nil {
				t.Errorf("%q: no error (dir %q)", c.args, dir)
			}
			continue
		}
		if err != nil || dir != c.dir || !slices.Equal(opts, c.opts) {
			t.Errorf("%q: dir %q opts %q err %v; want %q %q", c.args, dir, opts, err, c.dir, c.opts)
		}
	}
}

// TestSessionUsage: a bad command line is status 2, before anything is
// touched; a DIR without a session is 125.
func TestSessionUsage(t *testing.T) {
	tmp := t.TempDir()
	img := filepath.Join(tmp, "img")
	os.WriteFile(img, nil, 0o600)
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, exitUsage},
		{[]string{"--help"}, 0},
		{[]string{"frob"}, exitUsage},
		{[]string{"open", "-S", img}, exitUsage},
		{[]string{"open", "-S", img, filepath.Join(tmp, "s"), "--overlay", tmp}, exitUsage},
		{[]string{"open", "-S", img, filepath.Join(tmp, "s"), "--ephemeral"}, exitUsage},
		{[]string{"open", "-S", img, filepath.Join(tmp, "s"), "--syscall-mode=trap"}, exitUsage},
		{[]string{"run", tmp}, exitUsage},
		{[]string{"run", tmp, "-w", "rel", "--", "true"}, exitUsage},
		{[]string{"run", tmp, "--env", "NOEQUALS", "--", "true"}, exitUsage},
		{[]string{"run", tmp, "--bogus", "--", "true"}, exitUsage},
		{[]string{"checkpoint", tmp}, exitUsage},
		{[]string{"checkpoint", tmp, "../x"}, exitUsage},
		{[]string{"rollback", tmp, ".x"}, exitUsage},
		{[]string{"fork", tmp}, exitUsage},
		{[]string{"close"}, exitUsage},
		{[]string{"close", tmp, "--save"}, exitUsage},
		{[]string{"close", tmp, "--save="}, exitUsage},
		{[]string{"run", tmp, "--", "true"}, exitSetup},
		{[]string{"ps", filepath.Join(tmp, "none")}, exitSetup},
		{[]string{"checkpoint", tmp, "c1"}, exitSetup},
		{[]string{"close", tmp}, exitSetup},
	} {
		if got := runSession(c.args); got != c.want {
			t.Errorf("kbox session %q: status %d, want %d", c.args, got, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "s")); err == nil {
		t.Errorf("a refused open made its DIR")
	}
}
