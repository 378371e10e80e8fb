package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeInstall: `make install PREFIX=DIR` installs the kbox built in
// the checkout, its manual page generated from its help text, and the
// GDB/Delve helpers that exist; man renders the page and the installed
// kbox runs.
func TestMakeInstall(t *testing.T) {
	bin := kboxBin(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("SKIP (needs make): no make on PATH")
	}
	prefix := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "install", "PREFIX="+prefix)
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	installed := filepath.Join(prefix, "bin", "kbox")
	if st, err := os.Stat(installed); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("installed kbox: %v (mode %v)", err, st)
	}
	want, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(installed, "--version").Output()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("installed kbox --version: %q, %v; want %q", got, err, want)
	}

	page := filepath.Join(prefix, "share", "man", "man1", "kbox.1")
	roff, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(roff, []byte(".TH KBOX 1 ")) {
		t.Errorf("kbox.1 does not start with .TH KBOX 1:\n%s", lastLines(string(roff), 5))
	}
	// The page says what the binary's help says: every long option of
	// `kbox image --help` is on it.
	help, _ := exec.Command(bin, "image", "--help").CombinedOutput()
	var text string
	if _, err := exec.LookPath("man"); err == nil {
		c := exec.Command("man", "-l", page)
		c.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=120")
		out, err := c.Output()
		if err != nil {
			t.Fatalf("man -l %s: %v", page, err)
		}
		text = string(out)
	} else {
		t.Log("no man: checking the roff text itself")
		text = strings.ReplaceAll(string(roff), `\-`, "-")
	}
	text = strings.ReplaceAll(text, "\u2010", "-") // groff may print hyphens as U+2010
	for _, f := range strings.Fields(string(help)) {
		f = strings.TrimRight(f, ",")
		if !strings.HasPrefix(f, "--") || len(f) < 4 {
			continue
		}
		if name, _, _ := strings.Cut(f, "["); !strings.Contains(text, name) {
			t.Errorf("man page lacks %s", name)
		}
	}
	for _, w := range []string{"NAME", "SYNOPSIS", "EXIT STATUS", "kbox image", "kbox mcp", "kbox session", "rollback DIR NAME"} {
		if !strings.Contains(text, w) {
			t.Errorf("man page lacks %q:\n%s", w, lastLines(text, 20))
		}
	}

	for _, d := range []string{"gdb", "dlv"} {
		src := filepath.Join(repoRoot(), "scripts", d)
		files, _ := filepath.Glob(filepath.Join(src, "*"))
		for _, f := range files {
			rel, _ := filepath.Rel(src, f)
			a, _ := os.ReadFile(f)
			b, err := os.ReadFile(filepath.Join(prefix, "share", "kbox", d, rel))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("share/kbox/%s/%s not installed as in scripts/%s: %v", d, rel, d, err)
			}
		}
	}
}
