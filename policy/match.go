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
	// lit is the pattern's leading literal components ("/home" of
	// "/home/*/.ssh"): a path that does not start with them is no match.
	lit string
}

// compMatch matches one pattern component against one path component:
// a literal one by comparison, one with wildcards through path.Match.
func compMatch(pat, c string) bool {
	if !strings.ContainsAny(pat, `*?[\`) {
		return pat == c
	}
	ok, _ := path.Match(pat, c)
	return ok
}

// maxComps bounds a pattern's components: matching keeps the positions
// reached in a 64-bit mask, and takes time in the path's length times the
// pattern's.
const maxComps = 63

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
		if len(p.lit) == len(strings.Join(p.comps, "/"))+min(len(p.comps), 1) && !strings.ContainsAny(c, `*?[\`) && c != "**" {
			p.lit += "/" + c
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
func (p *Pattern) Match(abs string) bool {
	if l := len(p.lit); l > 0 && (len(abs) < l || abs[:l] != p.lit || len(abs) > l && abs[l] != '/') {
		return false
	}
	return matchComps(p.comps, abs)
}

// Beneath reports whether p could match a path strictly beneath the clean
// absolute directory abs, without matching abs itself.
func (p *Pattern) Beneath(abs string) bool {
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

// A set of pattern positions reached is a bit mask: bit i means the
// first i components of the pattern matched (maxComps < 64).

// closure adds, for every position before a "**", the position after it
// ("**" matches no component too).
func closure(pc []string, st uint64) uint64 {
	for i := range pc {
		if st&(1<<i) != 0 && pc[i] == "**" {
			st |= 1 << (i + 1)
		}
	}
	return st
}

// step is the positions reached from st by one more path component c.
func step(pc []string, st uint64, c string) uint64 {
	var next uint64
	for i := range pc {
		if st&(1<<i) == 0 {
			continue
		}
		if pc[i] == "**" {
			next |= 1 << i // it takes c too, and maybe more
			continue
		}
		if compMatch(pc[i], c) {
			next |= 1 << (i + 1)
		}
	}
	return closure(pc, next)
}

// matchComps: the components pc match the leading components of x (time
// linear in x for a pattern of bounded length).
func matchComps(pc []string, x string) bool {
	done := uint64(1) << len(pc)
	st := closure(pc, 1)
	for st&done == 0 {
		c, rest := nextComp(x)
		if c == "" {
			return false
		}
		if st = step(pc, st, c); st == 0 {
			return false
		}
		x = rest
	}
	return true
}

// prefixOf: x's components could be the leading components of a path the
// components pc match (some position is still live after all of x).
func prefixOf(pc []string, x string) bool {
	st := closure(pc, 1)
	for {
		c, rest := nextComp(x)
		if c == "" {
			return st != 0
		}
		if st = step(pc, st, c); st == 0 {
			return false
		}
		x = rest
	}
}
