package policy

import (
	"fmt"
	"path"
	"strings"
)

// Pattern is a guest path pattern: an absolute path whose components may
// hold the wildcards of path.Match (*, ?, [...], never matching a /), and
// components "**" that match any number of components (none too). A
// pattern matches a path it names and everything beneath it: "/etc"
// covers /etc/passwd, "/home/*/.ssh" every user's .ssh directory and its
// contents.
type Pattern struct {
	src   string
	comps []string
	score int // components other than "**": the more, the more specific
}

// maxComps bounds a pattern's components (matching takes time in the
// path's length times the pattern's).
const maxComps = 128

// Compile checks and compiles a pattern.
func Compile(s string) (Pattern, error) {
	if !strings.HasPrefix(s, "/") {
		return Pattern{}, fmt.Errorf("pattern %q: not an absolute path", s)
	}
	if strings.ContainsRune(s, 0) {
		return Pattern{}, fmt.Errorf("pattern %q: holds a NUL byte", s)
	}
	p := Pattern{src: s}
	for _, c := range strings.Split(s, "/") {
		switch c {
		case "":
			continue
		case ".", "..":
			return Pattern{}, fmt.Errorf("pattern %q: has a %q component (give a clean path)", s, c)
		case "**":
		default:
			if strings.Contains(c, "**") {
				return Pattern{}, fmt.Errorf("pattern %q: \"**\" must be a whole component", s)
			}
			if _, err := path.Match(c, ""); err != nil {
				return Pattern{}, fmt.Errorf("pattern %q: bad component %q", s, c)
			}
			p.score++
		}
		if p.comps = append(p.comps, c); len(p.comps) > maxComps {
			return Pattern{}, fmt.Errorf("pattern %q: more than %d components", s, maxComps)
		}
	}
	return p, nil
}

func (p Pattern) String() string { return p.src }

// Match reports whether p matches the clean absolute path abs or a
// directory above it.
func (p Pattern) Match(abs string) bool {
	return matchComps(p.comps, abs)
}

// Beneath reports whether p could match a path strictly beneath the clean
// absolute directory abs, without matching abs itself.
func (p Pattern) Beneath(abs string) bool {
	return !p.Match(abs) && prefixOf(p.comps, abs)
}

// nextComp splits the first component off a path ("/a/b" -> "a", "/b").
func nextComp(s string) (string, string) {
	s = strings.TrimLeft(s, "/")
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// states is the set of pattern positions reached: position i means the
// first i components of the pattern matched.
type states []bool

// closure adds, for every position before a "**", the position after it
// ("**" matches no component too).
func closure(pc []string, st states) {
	for i := range pc {
		if st[i] && pc[i] == "**" {
			st[i+1] = true
		}
	}
}

// step is the positions reached from st by one more path component c.
func step(pc []string, st, next states, c string) {
	for i := range next {
		next[i] = false
	}
	for i := range pc {
		if !st[i] {
			continue
		}
		if pc[i] == "**" {
			next[i] = true // it takes c too, and maybe more
			continue
		}
		if ok, _ := path.Match(pc[i], c); ok {
			next[i+1] = true
		}
	}
	closure(pc, next)
}

// run feeds x's components to the pattern pc, one at a time (time linear
// in the path for a pattern of bounded length); each(st) sees the
// positions after each prefix of x, the empty one first, and stops the
// walk by returning true.
func run(pc []string, x string, each func(st states, rest string) bool) bool {
	st, next := make(states, len(pc)+1), make(states, len(pc)+1)
	st[0] = true
	closure(pc, st)
	for {
		if each(st, x) {
			return true
		}
		c, rest := nextComp(x)
		if c == "" {
			return false
		}
		step(pc, st, next, c)
		st, next = next, st
		any := false
		for _, v := range st {
			any = any || v
		}
		if !any {
			return false
		}
		x = rest
	}
}

// matchComps: the components pc match the leading components of x.
func matchComps(pc []string, x string) bool {
	return run(pc, x, func(st states, _ string) bool { return st[len(pc)] })
}

// prefixOf: x's components could be the leading components of a path the
// components pc match (some position is still live after all of x).
func prefixOf(pc []string, x string) bool {
	return run(pc, x, func(st states, rest string) bool {
		if strings.Trim(rest, "/") != "" {
			return false
		}
		for _, v := range st {
			if v {
				return true
			}
		}
		return false
	})
}
