// Command mkman writes kbox's manual page, kbox.1 (roff, man macros), on
// stdout from the help texts of a built kbox binary: `kbox --help`,
// `kbox image --help`, `kbox import --help`, `kbox pull --help`, `kbox mcp
// --help`, `kbox session --help` and `kbox version`. The Makefile
// runs it (`make man`, `make install`), so the page says what the binary
// says.
//
//	go run ./scripts/mkman ./kbox > kbox.1
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkman KBOX_BINARY > kbox.1")
		os.Exit(2)
	}
	bin := os.Args[1]
	help := func(args ...string) string {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil && len(out) == 0 {
			fmt.Fprintf(os.Stderr, "mkman: %s %s: %v\n", bin, strings.Join(args, " "), err)
			os.Exit(1)
		}
		return string(out)
	}
	version := "dev"
	if f := strings.Fields(help("version")); len(f) >= 2 {
		version = f[1]
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	page(w, version, help("--help"), help("image", "--help"), help("mcp", "--help"), help("import", "--help"), help("pull", "--help"), help("session", "--help"))
}

func page(w *bufio.Writer, version, top, image, mcp, imp, pull, session string) {
	fmt.Fprintf(w, ".TH KBOX 1 \"\" \"kbox %s\" \"User Commands\"\n", esc(version))
	fmt.Fprintln(w, ".SH NAME")
	fmt.Fprintln(w, `kbox \- run Linux programs against a Linux kernel linked into kbox (LKL), from an ext4 image`)
	fmt.Fprintln(w, ".SH SYNOPSIS")
	for _, h := range []string{top, image, imp, pull, mcp, session} {
		if u, ok := strings.CutPrefix(firstLine(h), "usage: "); ok {
			fmt.Fprintf(w, ".B %s\n.br\n", esc(u))
		}
	}
	fmt.Fprintln(w, ".SH DESCRIPTION")
	fmt.Fprintln(w, "kbox boots a real Linux kernel as an in-process library (LKL) from an ext4 image and runs unmodified Linux programs against it, with no root, container or VM. The guest's file, metadata and identity system calls are served by that kernel.")
	fmt.Fprintln(w, ".SH COMMANDS")
	body(w, top)
	fmt.Fprintln(w, ".SH IMAGE")
	body(w, image)
	fmt.Fprintln(w, ".SH IMPORT")
	body(w, imp)
	fmt.Fprintln(w, ".SH PULL")
	body(w, pull)
	fmt.Fprintln(w, ".SH MCP")
	body(w, mcp)
	fmt.Fprintln(w, ".SH SESSION")
	body(w, session)
	fmt.Fprint(w, `.SH EXIT STATUS
The guest's own status (128+N if signal N killed it); 2 for a bad command line or a feature this build lacks; 125 when kbox itself cannot set up (a missing, corrupt or busy image); 126 or 127 when the guest program cannot be executed or does not exist.
.SH ENVIRONMENT
.TP
.B KBOX_DEBUG=1
print every dispatched system call on stderr.
.SH FILES
.TP
.I share/kbox/gdb, share/kbox/dlv
GDB and Delve helpers for the kernel and the supervisor, where installed.
.SH SEE ALSO
The project's docs/images.md, docs/architecture.md, docs/tiers.md, docs/security.md and docs/testing.md.
`)
}

var (
	optLine  = regexp.MustCompile(`^\s+(\S.*?)\s{2,}(\S.*)$`)
	contLine = regexp.MustCompile(`^\s{8,}(\S.*)$`)
)

// body converts a help text, its usage line left out: paragraphs become
// paragraphs, "  -x, --opt ARG   text" lines (with their indented
// continuation lines) tagged paragraphs, and "word:" lines subsection
// headers.
func body(w *bufio.Writer, h string) {
	lines := strings.Split(strings.TrimRight(h, "\n"), "\n")
	if len(lines) > 0 && strings.HasPrefix(lines[0], "usage:") {
		lines = lines[1:]
	}
	inOpt, para := false, false
	for _, l := range lines {
		switch {
		case strings.TrimSpace(l) == "":
			inOpt, para = false, false
		case inOpt && contLine.MatchString(l):
			fmt.Fprintln(w, esc(contLine.FindStringSubmatch(l)[1]))
		case optLine.MatchString(l):
			m := optLine.FindStringSubmatch(l)
			fmt.Fprintf(w, ".TP\n.B %s\n%s\n", esc(m[1]), esc(m[2]))
			inOpt, para = true, false
		case !strings.HasPrefix(l, " ") && strings.HasSuffix(l, ":"):
			if l != "commands:" { // the section's own name
				fmt.Fprintf(w, ".SS %s\n", esc(strings.TrimSuffix(l, ":")))
			}
			inOpt, para = false, false
		default:
			if !para {
				fmt.Fprintln(w, ".PP")
				para = true
			}
			inOpt = false
			fmt.Fprintln(w, esc(strings.TrimSpace(l)))
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// esc makes text safe for roff: backslashes doubled, hyphens \-, and a
// line never starts with a control character.
func esc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
