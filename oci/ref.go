package oci

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
)

// Ref is an image reference: [REGISTRY/]REPOSITORY[:TAG][@DIGEST].
type Ref struct {
	// Registry is the registry's host[:port] as written (docker.io for
	// Docker Hub); Host the one its API is at.
	Registry, Host string
	Repo           string
	Tag            string
	Digest         string
}

// Compiled at first use, not in every kbox start-up's package init.
var (
	repoRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	})
	tagRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`) })
)

// ParseRef parses an image reference as docker pull takes it.
func ParseRef(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("bad image reference %q: %s", s, why)
	}
	var r Ref
	rest := s
	if name, d, ok := strings.Cut(rest, "@"); ok {
		if err := checkDigest(d); err != nil {
			return bad(err.Error())
		}
		rest, r.Digest = name, d
	}
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		rest, r.Tag = rest[:i], rest[i+1:]
		if !tagRE().MatchString(r.Tag) {
			return bad("bad tag")
		}
	}
	first, remainder, hasSlash := strings.Cut(rest, "/")
	if hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
		r.Registry, rest = first, remainder
	} else {
		r.Registry = "docker.io"
	}
	if r.Registry == "docker.io" || r.Registry == "index.docker.io" {
		r.Registry, r.Host = "docker.io", "registry-1.docker.io"
		if !strings.Contains(rest, "/") {
			rest = "library/" + rest
		}
	} else {
		r.Host = r.Registry
	}
	if !repoRE().MatchString(rest) {
		return bad("the repository name must be lowercase letters, digits and separators")
	}
	r.Repo = rest
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	return r, nil
}

// String is the reference written in full.
func (r Ref) String() string {
	s := r.Registry + "/" + r.Repo
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// reference is what the manifest is asked for by: the digest, else the tag.
func (r Ref) reference() string {
	if r.Digest != "" {
		return r.Digest
	}
	return r.Tag
}

// loopback reports whether the registry is on the loopback (where plain
// HTTP is allowed).
func (r Ref) loopback() bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
