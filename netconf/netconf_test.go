package netconf

import "testing"

func TestNetFilesText(t *testing.T) {
	for _, c := range []struct {
		name, image, want string
	}{
		{"no image file", "", "# kbox --net: the DNS responder (docs/networking.md)\nnameserver 10.0.2.3\n"},
		{"image's search and options kept", "nameserver 1.1.1.1\nsearch example.org\n options ndots:2\n#c\n",
			"# kbox --net: the DNS responder (docs/networking.md)\nnameserver 10.0.2.3\nsearch example.org\noptions ndots:2\n"},
	} {
		if got := string(ResolvConf([]byte(c.image))); got != c.want {
			t.Errorf("resolv.conf, %s: %q, want %q", c.name, got, c.want)
		}
	}
	head := "# kbox --net (docs/networking.md)\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	for _, c := range []struct {
		name, host, image, want string
	}{
		{"hostname", "box", "", head + "10.0.2.15\tbox\n"},
		{"dotted hostname", "box.example.org", "", head + "10.0.2.15\tbox.example.org box\n"},
		{"no hostname", "(none)", "", head},
		{"image's file after", "box", "192.0.2.1 db", head + "10.0.2.15\tbox\n# the image's /etc/hosts\n192.0.2.1 db\n"},
	} {
		if got := string(HostsFile(c.host, []byte(c.image))); got != c.want {
			t.Errorf("hosts, %s: %q, want %q", c.name, got, c.want)
		}
	}
}
