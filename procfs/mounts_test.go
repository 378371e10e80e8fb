package procfs

import "testing"

// lklMountinfo is LKL's mountinfo as the image's root sees it, with an
// LKL mount at /proc (hidden by kbox's route) and a guest's own mount.
const lklMountinfo = `9 1 254:0 / / rw,relatime - ext4 /dev/0000fe00 rw
13 9 254:16 /tmp /tmp rw,relatime - ext4 /dev/0000fe10 rw,minixdf,nombcache
14 9 0:11 / /proc rw,relatime - proc proc rw
15 14 0:12 / /proc/sys/fs/binfmt_misc rw,relatime - binfmt_misc binfmt_misc rw
20 9 0:30 / /mnt/x rw,relatime shared:1 - tmpfs none rw
garbage line
`

const lklPartitions = `major minor  #blocks  name

 254        0      65536 vda
 254       16    8388608 vdb
`

func TestGuestMountTable(t *testing.T) {
	ms := parseMountinfo(lklMountinfo)
	if len(ms) != 5 {
		t.Fatalf("parsed %d mounts: %+v", len(ms), ms)
	}
	renameDisks(ms, lklPartitions)
	extra := []mountEntry{
		{dev: "0:20", root: "/", point: "/proc", opts: "rw,nosuid", fstype: "proc", source: "proc", super: "rw"},
		{dev: "8:1", root: "/", point: "/mnt/x/bind\\040dir", opts: "ro,relatime", fstype: "ext4", source: "ext4", super: "ro"},
	}
	all := mergeMounts(ms, extra)
	wantInfo := `9 1 254:0 / / rw,relatime - ext4 /dev/vda rw
21 9 0:20 / /proc rw,nosuid - proc proc rw
22 20 8:1 / /mnt/x/bind\040dir ro,relatime - ext4 ext4 ro
13 9 254:16 /tmp /tmp rw,relatime - ext4 /dev/vdb rw,minixdf,nombcache
20 9 0:30 / /mnt/x rw,relatime shared:1 - tmpfs none rw
`
	if got := formatMountinfo(all); got != wantInfo {
		t.Errorf("mountinfo:\n%s\nwant:\n%s", got, wantInfo)
	}
	wantMounts := `/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid 0 0
ext4 /mnt/x/bind\040dir ext4 ro,relatime 0 0
/dev/vdb /tmp ext4 rw,relatime,minixdf,nombcache 0 0
none /mnt/x tmpfs rw,relatime 0 0
`
	if got := formatMounts(all); got != wantMounts {
		t.Errorf("mounts:\n%s\nwant:\n%s", got, wantMounts)
	}
	if got := formatMountstats(all[:1]); got != "device /dev/vda mounted on / with fstype ext4\n" {
		t.Errorf("mountstats %q", got)
	}
	// Without LKL's table: a root of its own, then kbox's.
	none := mergeMounts(nil, extra[:1])
	if len(none) != 2 || none[0].point != "/" || none[1].parent != none[0].id || none[1].id == none[0].id {
		t.Errorf("without LKL's table: %+v", none)
	}
	if got := escapeMount("/a b\\c\td"); got != `/a\040b\134c\011d` {
		t.Errorf("escapeMount %q", got)
	}
}
