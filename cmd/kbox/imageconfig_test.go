package main

import "testing"

func TestResolveUser(t *testing.T) {
	passwd := "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\nshort:x:7:8\n"
	group := "root:x:0:\nstaff:x:50:\napp:x:1001:\n"
	for _, c := range []struct {
		spec     string
		uid, gid uint32
		home     string
		err      bool
	}{
		{spec: "app", uid: 1000, gid: 1001, home: "/home/app"},
		{spec: "1000", uid: 1000, gid: 1001, home: "/home/app"},
		{spec: "4242", uid: 4242, gid: 0},
		{spec: "app:staff", uid: 1000, gid: 50, home: "/home/app"},
		{spec: "app:60", uid: 1000, gid: 60, home: "/home/app"},
		{spec: "0:0", uid: 0, gid: 0, home: "/root"},
		{spec: "short", uid: 7, gid: 8},
		{spec: "nobody", err: true},
		{spec: "app:nogroup", err: true},
	} {
		u, err := resolveUser(c.spec, passwd, group)
		if (err != nil) != c.err || err == nil && (u.uid != c.uid || u.gid != c.gid || u.home != c.home) {
			t.Errorf("resolveUser(%q) = %+v, %v", c.spec, u, err)
		}
	}
}
