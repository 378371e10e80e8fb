package oci

import (
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	for _, c := range []struct {
		in                        string
		registry, host, repo, tag string
		digest                    string
		err                       string
	}{
		{in: "alpine", registry: "docker.io", host: "registry-1.docker.io", repo: "library/alpine", tag: "latest"},
		{in: "alpine:3.20", registry: "docker.io", host: "registry-1.docker.io", repo: "library/alpine", tag: "3.20"},
		{in: "docker.io/library/python:3.12-slim", registry: "docker.io", host: "registry-1.docker.io", repo: "library/python", tag: "3.12-slim"},
		{in: "ghcr.io/org/img@sha256:" + strings.Repeat("a", 64), registry: "ghcr.io", host: "ghcr.io", repo: "org/img", digest: "sha256:" + strings.Repeat("a", 64)},
		{in: "127.0.0.1:5000/test/x:v1", registry: "127.0.0.1:5000", host: "127.0.0.1:5000", repo: "test/x", tag: "v1"},
		{in: "localhost/x", registry: "localhost", host: "localhost", repo: "x", tag: "latest"},
		{in: "user/img", registry: "docker.io", host: "registry-1.docker.io", repo: "user/img", tag: "latest"},
		{in: "Bad/Ref", err: "lowercase"},
		{in: "x@sha256:abc", err: "bad digest"},
		{in: "x:bad tag", err: "bad tag"},
		{in: "", err: "bad image reference"},
	} {
		r, err := ParseRef(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRef(%q): %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || r.Registry != c.registry || r.Host != c.host || r.Repo != c.repo || r.Tag != c.tag || r.Digest != c.digest {
			t.Errorf("ParseRef(%q) = %+v, %v", c.in, r, err)
		}
	}
	for host, want := range map[string]bool{"127.0.0.1:5000": true, "localhost": true, "[::1]:5000": true, "ghcr.io": false, "10.0.0.1:5000": false} {
		if got := (Ref{Host: host}).loopback(); got != want {
			t.Errorf("%s: loopback %v, want %v", host, got, want)
		}
	}
}

func TestSelectManifest(t *testing.T) {
	d := func(os, arch, variant, digest string) descriptor {
		return descriptor{Digest: digest, Platform: &Platform{OS: os, Architecture: arch, Variant: variant}}
	}
	idx := []descriptor{d("linux", "amd64", "", "a"), d("linux", "arm64", "v8", "b"), d("unknown", "unknown", "", "att"), d("linux", "arm", "v7", "c")}
	for _, c := range []struct {
		want     Platform
		explicit bool
		digest   string
		err      string
	}{
		{Platform{"linux", "amd64", ""}, false, "a", ""},
		{Platform{"linux", "arm64", "v8"}, false, "b", ""},
		{Platform{"linux", "arm64", ""}, true, "b", ""},
		{Platform{"linux", "arm", "v7"}, true, "c", ""},
		{Platform{"linux", "arm", "v6"}, true, "", "no image for linux/arm/v6: the index has linux/amd64, linux/arm64/v8, linux/arm/v7; --platform linux/arm/v6 is not among them"},
		{Platform{"linux", "s390x", ""}, false, "", "choose one with --platform"},
	} {
		got, err := selectManifest(idx, c.want, c.explicit)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want error %q", c.want, err, c.err)
			}
			continue
		}
		if err != nil || got.Digest != c.digest {
			t.Errorf("%v: %v %v, want %s", c.want, got.Digest, err, c.digest)
		}
	}
	if got, err := selectManifest([]descriptor{{Digest: "only"}}, HostPlatform(), false); err != nil || got.Digest != "only" {
		t.Errorf("one entry without a platform: %v %v", got, err)
	}
}

func TestParseChallenge(t *testing.T) {
	s, p := parseChallenge(`Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"`)
	if s != "Bearer" || p["realm"] != "https://auth.docker.io/token" || p["service"] != "registry.docker.io" || p["scope"] != "repository:library/alpine:pull" {
		t.Errorf("got %q %v", s, p)
	}
	s, p = parseChallenge(`Basic realm=basic-realm`)
	if s != "Basic" || p["realm"] != "basic-realm" {
		t.Errorf("got %q %v", s, p)
	}
}

func TestParsePlatform(t *testing.T) {
	for in, ok := range map[string]bool{"linux/amd64": true, "linux/arm64/v8": true, "linux": false, "/amd64": false, "a/b/c/d": false} {
		if _, err := ParsePlatform(in); (err == nil) != ok {
			t.Errorf("ParsePlatform(%q): %v", in, err)
		}
	}
}
