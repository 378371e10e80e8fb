// Package policy reads kbox's policy files (--policy FILE, TOML): which
// guest paths are hidden, read-only or read-write, which syscalls are
// denied or limited to a number of calls, the run's resource limits and
// its network egress rules. It only parses and matches; the engine
// (package dispatch) enforces paths and syscalls, cmd/kbox the limits and
// the network rules. docs/agents.md describes the file.
package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"
)

// Policy is one policy file.
type Policy struct {
	Paths    Paths    `toml:"paths"`
	Syscalls Syscalls `toml:"syscalls"`
	Limits   Limits   `toml:"limits"`
	Network  Network  `toml:"network"`

	// SHA256 is the hex SHA-256 of the file's bytes (the audit log's
	// run_start names it); of a merged policy, see Merge.
	SHA256 string `toml:"-"`
	// Sources are the SHA-256 of each file a merged policy came from,
	// in order (nil for a single file).
	Sources []string `toml:"-"`

	// layers are the compiled path rules: one a file, the files a merged
	// policy came from one each (merge.go). A path's class is the
	// strictest any layer gives it.
	layers []layer
}

// layer is one file's compiled path rules.
type layer struct {
	rules []rule // in file order within each class
	def   Class
}

// Paths are the path rules.
type Paths struct {
	// Default is the class of a path no pattern matches: "read_write"
	// (the default), "read_only" or "hidden".
	Default   string   `toml:"default,omitempty"`
	Hidden    []string `toml:"hidden,omitempty"`
	ReadOnly  []string `toml:"read_only,omitempty"`
	ReadWrite []string `toml:"read_write,omitempty"`
}

// Syscalls are the syscall rules.
type Syscalls struct {
	// Deny lists syscalls ("ptrace") and families ("family:net"), each
	// optionally with the errno to fail them with ("ptrace=EACCES");
	// EPERM by default.
	Deny []string `toml:"deny,omitempty"`
	// Quota allows each named syscall or family this many calls in the
	// run; the calls after fail with QuotaErrno.
	Quota map[string]int64 `toml:"quota,omitempty"`
	// QuotaErrno names the errno of a call over its quota (EPERM).
	QuotaErrno string `toml:"quota_errno,omitempty"`
}

// Limits are the run's resource limits; zero is no limit.
type Limits struct {
	WallTime     Duration `toml:"wall_time,omitempty"`
	CPUTime      Duration `toml:"cpu_time,omitempty"`
	AddressSpace Size     `toml:"address_space,omitempty"`
	Processes    int      `toml:"processes,omitempty"`
	FileSize     Size     `toml:"file_size,omitempty"`
	// ImageWrites bounds how much the image's used space may grow in
	// the run (bytes); beyond it writes fail with ENOSPC.
	ImageWrites Size `toml:"image_writes,omitempty"`
}

// Network is the egress of --net: Allow as --net-allow, AllowHosts as
// --net-allow-host, DenyAll as --net-deny-all.
type Network struct {
	Allow      []string `toml:"allow,omitempty"`
	AllowHosts []string `toml:"allow_hosts,omitempty"`
	DenyAll    bool     `toml:"deny_all,omitempty"`
}

// Class is what a path rule makes of a path.
type Class uint8

const (
	ReadWrite Class = iota
	ReadOnly
	Hidden
)

var classNames = [...]string{ReadWrite: "read_write", ReadOnly: "read_only", Hidden: "hidden"}

func (c Class) String() string { return classNames[c] }

// rule is one compiled path pattern.
type rule struct {
	pat   Pattern
	class Class
	name  string // "hidden:/etc/shadow"
}

// Duration is a TOML string such as "30s" or "2m".
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil || v < 0 {
		return fmt.Errorf("bad duration %q: want e.g. \"500ms\", \"30s\", \"2m\"", b)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Size is a byte count: an integer, or a string with a suffix K, M, G
// (powers of 1024; "KiB", "MiB", "GiB" too).
type Size int64

func (s *Size) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return fmt.Errorf("bad size %d: negative", x)
		}
		*s = Size(x)
		return nil
	case string:
		n, err := ParseSize(x)
		if err != nil {
			return err
		}
		*s = Size(n)
		return nil
	}
	return fmt.Errorf("bad size %v: want a byte count or a string such as \"64M\"", v)
}

func (s Size) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(s), 10)), nil }

// ParseSize reads "4096", "64K", "64M", "1G", "2GiB".
func ParseSize(x string) (int64, error) {
	t := strings.TrimSpace(x)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "iB"), "B")
	mul := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K', 'k':
			mul = 1 << 10
		case 'M', 'm':
			mul = 1 << 20
		case 'G', 'g':
			mul = 1 << 30
		case 'T', 't':
			mul = 1 << 40
		}
		if mul != 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, fmt.Errorf("bad size %q: want a byte count or a string such as \"64M\"", x)
	}
	return n * mul, nil
}

// Load reads and checks a policy file.
func Load(file string) (*Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", file, err)
	}
	return p, nil
}

// Parse reads and checks a policy. Unknown keys are an error naming them.
func Parse(b []byte) (*Policy, error) {
	p := &Policy{}
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(p)
	if err != nil {
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("unknown key %s", strings.Join(keys, ", "))
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	p.SHA256 = hex.EncodeToString(sum[:])
	return p, nil
}

func (p *Policy) check() error {
	var l layer
	switch p.Paths.Default {
	case "", "read_write":
		l.def = ReadWrite
	case "read_only":
		l.def = ReadOnly
	case "hidden":
		l.def = Hidden
	default:
		return fmt.Errorf("paths.default = %q: want \"read_write\", \"read_only\" or \"hidden\"", p.Paths.Default)
	}
	for _, c := range []struct {
		list  []string
		class Class
	}{{p.Paths.Hidden, Hidden}, {p.Paths.ReadOnly, ReadOnly}, {p.Paths.ReadWrite, ReadWrite}} {
		for _, s := range c.list {
			pat, err := Compile(s)
			if err != nil {
				return fmt.Errorf("paths.%s: %w", c.class, err)
			}
			l.rules = append(l.rules, rule{pat: pat, class: c.class, name: c.class.String() + ":" + s})
		}
	}
	p.layers = []layer{l}
	for _, d := range p.Syscalls.Deny {
		name, en, _ := strings.Cut(d, "=")
		if name == "" || strings.TrimPrefix(name, "family:") == "" {
			return fmt.Errorf("syscalls.deny: empty name in %q", d)
		}
		if en != "" {
			if _, ok := Errno(en); !ok {
				return fmt.Errorf("syscalls.deny: %q: unknown errno %q", d, en)
			}
		}
	}
	for name, n := range p.Syscalls.Quota {
		if strings.TrimPrefix(name, "family:") == "" {
			return fmt.Errorf("syscalls.quota: empty name")
		}
		if n < 0 {
			return fmt.Errorf("syscalls.quota.%s = %d: negative", name, n)
		}
	}
	if e := p.Syscalls.QuotaErrno; e != "" {
		if _, ok := Errno(e); !ok {
			return fmt.Errorf("syscalls.quota_errno: unknown errno %q", e)
		}
	}
	if n := p.Limits.Processes; n < 0 {
		return fmt.Errorf("limits.processes = %d: negative", n)
	}
	return nil
}

// Default is the class of a path no pattern matches (of a merged
// policy, the strictest of its files' defaults).
func (p *Policy) Default() Class {
	d := ReadWrite
	for i := range p.layers {
		d = max(d, p.layers[i].def)
	}
	return d
}

// HasPaths says that some path may be other than read-write: the engine
// checks paths only then.
func (p *Policy) HasPaths() bool {
	if p == nil {
		return false
	}
	for i := range p.layers {
		l := &p.layers[i]
		if l.def != ReadWrite {
			return true
		}
		for _, r := range l.rules {
			if r.class != ReadWrite {
				return true
			}
		}
	}
	return false
}

// Classify returns the class of the clean absolute guest path abs and the
// name of the rule that decided it ("" for the default). In each file the
// most specific pattern that matches abs or a directory above it wins
// (the one with the most literal components); on a tie hidden wins over
// read_only, and read_only over read_write. Of a merged policy the
// strictest class any file gives wins, on a tie the first file's rule.
func (p *Policy) Classify(abs string) (Class, string) {
	best, name := ReadWrite, ""
	for i := range p.layers {
		c, n := p.layers[i].classify(abs)
		if i == 0 || c > best {
			best, name = c, n
		}
	}
	return best, name
}

func (l *layer) classify(abs string) (Class, string) {
	best, bestScore, name := l.def, -1, ""
	for i := range l.rules {
		r := &l.rules[i]
		if !r.pat.Match(abs) {
			continue
		}
		s := r.pat.score
		if s > bestScore || s == bestScore && r.class > best {
			best, bestScore, name = r.class, s, r.name
		}
	}
	return best, name
}

// Guards returns the name of a hidden or read-only rule that could match a
// path strictly beneath the directory abs, or "": moving or removing abs
// would move what the rule protects out of its reach.
func (p *Policy) Guards(abs string) string {
	for i := range p.layers {
		l := &p.layers[i]
		for j := range l.rules {
			r := &l.rules[j]
			if r.class != ReadWrite && r.pat.Beneath(abs) {
				return r.name
			}
		}
		if l.def != ReadWrite {
			return "default:" + l.def.String()
		}
	}
	return ""
}

// HidesIn says that some entry of the directory abs may be hidden: its
// listing must be filtered.
func (p *Policy) HidesIn(abs string) bool {
	for i := range p.layers {
		l := &p.layers[i]
		if l.def == Hidden {
			return true
		}
		for j := range l.rules {
			if r := &l.rules[j]; r.class == Hidden && r.pat.Beneath(abs) {
				return true
			}
		}
	}
	return false
}

// QuotaErrno is the errno of a call over its quota.
func (p *Policy) QuotaErrnoValue() unix.Errno {
	if en, ok := Errno(p.Syscalls.QuotaErrno); ok {
		return en
	}
	return unix.EPERM
}

// Deny is one parsed entry of syscalls.deny.
type Deny struct {
	Name   string // a syscall name, or "family:NAME"
	Errno  unix.Errno
	Family bool
}

// Denials returns syscalls.deny parsed.
func (p *Policy) Denials() []Deny {
	var out []Deny
	for _, d := range p.Syscalls.Deny {
		name, es, _ := strings.Cut(d, "=")
		en := unix.EPERM
		if es != "" {
			en, _ = Errno(es)
		}
		fam, isFam := strings.CutPrefix(name, "family:")
		if isFam {
			name = fam
		}
		out = append(out, Deny{Name: name, Errno: en, Family: isFam})
	}
	return out
}

// Quotas returns syscalls.quota sorted by name.
func (p *Policy) Quotas() []string {
	var out []string
	for k := range p.Syscalls.Quota {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Errno reads an errno name ("EPERM") or number.
func Errno(s string) (unix.Errno, bool) {
	if s == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(s); err == nil {
		return unix.Errno(n), n > 0 && n < 4096
	}
	for i := 1; i < 256; i++ {
		if unix.ErrnoName(unix.Errno(i)) == s {
			return unix.Errno(i), true
		}
	}
	return 0, false
}

// Effective renders the policy with its defaults filled in, as TOML:
// sections and limits that are not set are left out. Of a merged policy
// it lists every file's patterns together, under the strictest default:
// a summary, not the same policy read as one file.
func (p *Policy) Effective() string {
	paths := map[string]any{"default": p.Default().String()}
	for k, v := range map[string][]string{"hidden": p.Paths.Hidden, "read_only": p.Paths.ReadOnly, "read_write": p.Paths.ReadWrite} {
		if len(v) > 0 {
			paths[k] = v
		}
	}
	out := map[string]any{"paths": paths}
	sys := map[string]any{}
	var deny []string
	for _, d := range p.Denials() {
		n := d.Name
		if d.Family {
			n = "family:" + n
		}
		deny = append(deny, n+"="+unix.ErrnoName(d.Errno))
	}
	if len(deny) > 0 {
		sys["deny"] = deny
	}
	if len(p.Syscalls.Quota) > 0 {
		sys["quota"] = p.Syscalls.Quota
		sys["quota_errno"] = unix.ErrnoName(p.QuotaErrnoValue())
	}
	if len(sys) > 0 {
		out["syscalls"] = sys
	}
	lim := map[string]any{}
	l := p.Limits
	if l.WallTime > 0 {
		lim["wall_time"] = time.Duration(l.WallTime).String()
	}
	if l.CPUTime > 0 {
		lim["cpu_time"] = time.Duration(l.CPUTime).String()
	}
	if l.AddressSpace > 0 {
		lim["address_space"] = int64(l.AddressSpace)
	}
	if l.Processes > 0 {
		lim["processes"] = l.Processes
	}
	if l.FileSize > 0 {
		lim["file_size"] = int64(l.FileSize)
	}
	if l.ImageWrites > 0 {
		lim["image_writes"] = int64(l.ImageWrites)
	}
	if len(lim) > 0 {
		out["limits"] = lim
	}
	if len(p.Network.Allow) > 0 || len(p.Network.AllowHosts) > 0 || p.Network.DenyAll {
		nw := map[string]any{"allow": append([]string{}, p.Network.Allow...), "deny_all": p.Network.DenyAll}
		if len(p.Network.AllowHosts) > 0 {
			nw["allow_hosts"] = append([]string{}, p.Network.AllowHosts...)
		}
		out["network"] = nw
	}
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(out); err != nil {
		return "# " + err.Error() + "\n"
	}
	return b.String()
}
