//go:build lkl

package tests

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// kbox import (docs/images.md): images built here from layers written
// with archive/tar, imported, and looked at by a guest under kbox, by
// debugfs and by e2fsck.

// modelFile is what the model of the layers says a path holds.
type modelFile struct {
	typ      byte
	mode     int64
	uid, gid int
	size     int
	major    int64
	minor    int64
	mtime    time.Time
}

// modelTree applies layers to a map as the OCI image spec says, symlinks
// met as parents resolved inside the root: what the guest must see.
func modelTree(layers [][]testEntry) map[string]*modelFile {
	m := map[string]*modelFile{"/": {typ: tar.TypeDir, mode: 0o755}}
	links := map[string]string{}
	resolve := func(p string) string {
		// Resolve symlinks among p's parents, inside the root.
		parts := strings.Split(strings.Trim(p, "/"), "/")
		cur := "/"
		for i, c := range parts {
			next := path.Join(cur, c)
			for n := 0; n < 10 && i < len(parts)-1; n++ {
				l, ok := links[next]
				if !ok {
					break
				}
				if strings.HasPrefix(l, "/") {
					next = path.Clean(l)
				} else {
					next = path.Clean("/" + path.Join(cur, l))
				}
			}
			cur = next
		}
		return cur
	}
	removeUnder := func(p string, keep map[string]bool) {
		for k := range m {
			if strings.HasPrefix(k, p+"/") && !keep[k] {
				delete(m, k)
				delete(links, k)
			}
		}
	}
	for _, layer := range layers {
		made := map[string]bool{}
		for _, e := range layer {
			p := resolve(path.Clean("/" + e.name))
			dir, base := path.Split(p)
			if base == ".wh..wh..opq" {
				removeUnder(path.Clean(dir), made)
				continue
			}
			if name, ok := strings.CutPrefix(base, ".wh."); ok {
				t := path.Join(dir, name)
				delete(m, t)
				delete(links, t)
				removeUnder(t, nil)
				continue
			}
			made[p] = true
			if e.typ == tar.TypeLink {
				m[p] = m[path.Clean("/"+e.link)]
				continue
			}
			if old := m[p]; old == nil || old.typ != tar.TypeDir || e.typ != tar.TypeDir {
				removeUnder(p, nil)
			}
			delete(links, p)
			f := &modelFile{typ: e.typ, mode: e.mode, uid: e.uid, gid: e.gid, size: len(e.data), major: e.major, minor: e.minor, mtime: e.mtime}
			if f.mtime.IsZero() {
				f.mtime = baseTime
			}
			if e.typ == tar.TypeSymlink {
				f.size, f.mode = len(e.link), 0o777
				links[p] = e.link
			}
			m[p] = f
		}
	}
	return m
}

// statLine is how `stat -c %n|%F|%a|%u|%g|%s|%h|%t,%T|%Y` shows f
// (busybox's stat), with the link count nlink.
func (f *modelFile) statLine(p string, nlink int) string {
	kind := map[byte]string{tar.TypeReg: "regular file", tar.TypeDir: "directory", tar.TypeSymlink: "symbolic link",
		tar.TypeChar: "character special file", tar.TypeBlock: "block special file", tar.TypeFifo: "fifo"}[f.typ]
	size := fmt.Sprint(f.size)
	if f.typ == tar.TypeDir {
		size, nlink = "-", 0 // not compared
	}
	dev := "0,0"
	if f.typ == tar.TypeChar || f.typ == tar.TypeBlock {
		dev = fmt.Sprintf("%x,%x", f.major, f.minor)
	}
	return fmt.Sprintf("%s|%s|%o|%d|%d|%s|%d|%s|%d", p, kind, f.mode&0o7777, f.uid, f.gid, size, nlink, dev, f.mtime.Unix())
}

// fileCap is a version 2 security.capability value: effective,
// cap_net_bind_service (10) permitted.
const fileCap = "\x01\x00\x00\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

const statFormat = "%n|%F|%a|%u|%g|%s|%h|%t,%T|%Y"

// layeredImage is three layers over busybox with what the OCI image spec
// asks of an importer: whiteouts of a file and of a directory, an opaque
// directory, a hard link across layers, a setuid and a setgid file,
// device nodes, a FIFO, a file owned by 1000:1000, an extended
// attribute, times, and a symlink parent that points above the root.
func layeredImage(t testing.TB) [][]testEntry {
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	l1 := append(busyboxEntries(t),
		testEntry{name: "./data/", typ: tar.TypeDir, mode: 0o755},
		testEntry{name: "./data/f1.txt", typ: tar.TypeReg, mode: 0o644, data: "one\n", mtime: old},
		testEntry{name: "./gone.txt", typ: tar.TypeReg, mode: 0o644, data: "bye\n"},
		testEntry{name: "./old/", typ: tar.TypeDir, mode: 0o755},
		testEntry{name: "./old/a.txt", typ: tar.TypeReg, mode: 0o644, data: "a\n"},
		testEntry{name: "./opq/", typ: tar.TypeDir, mode: 0o755},
		testEntry{name: "./opq/old.txt", typ: tar.TypeReg, mode: 0o644, data: "old\n"},
		testEntry{name: "./opq/sub/", typ: tar.TypeDir, mode: 0o755},
		testEntry{name: "./opq/sub/deep.txt", typ: tar.TypeReg, mode: 0o644, data: "deep\n"},
		testEntry{name: "./srv/", typ: tar.TypeDir, mode: 0o755},
		testEntry{name: "./evil", typ: tar.TypeSymlink, link: "../../../../srv"},
		testEntry{name: "./home/", typ: tar.TypeDir, mode: 0o755},
		testEntry{name: "./home/app/", typ: tar.TypeDir, mode: 0o750, uid: 1000, gid: 1000},
	)
	l2 := []testEntry{
		{name: "./.wh.gone.txt", typ: tar.TypeReg},
		{name: "./opq/", typ: tar.TypeDir, mode: 0o711},
		{name: "./opq/.wh..wh..opq", typ: tar.TypeReg},
		{name: "./opq/new.txt", typ: tar.TypeReg, mode: 0o600, data: "new\n"},
		{name: "./data/", typ: tar.TypeDir, mode: 0o755},
		{name: "./data/hard.txt", typ: tar.TypeLink, link: "data/f1.txt"},
		{name: "./data/x.txt", typ: tar.TypeReg, mode: 0o644, data: "x\n", xattrs: map[string]string{"user.kbox": "hello"}},
		{name: "./sbin/", typ: tar.TypeDir, mode: 0o755},
		{name: "./sbin/suid", typ: tar.TypeReg, mode: 0o4755, data: "#!/bin/sh\necho suid\n"},
		{name: "./sbin/sgid", typ: tar.TypeReg, mode: 0o2755, gid: 50, data: "#!/bin/sh\necho sgid\n"},
		// A file capability (cap_net_bind_service, effective), owned by
		// 1000: set after the owner, which would clear it.
		{name: "./sbin/capped", typ: tar.TypeReg, mode: 0o755, uid: 1000, data: "#!/bin/sh\n", xattrs: map[string]string{"security.capability": fileCap}},
		{name: "./dev/", typ: tar.TypeDir, mode: 0o755},
		{name: "./dev/mychr", typ: tar.TypeChar, mode: 0o666, major: 1, minor: 3},
		{name: "./dev/myblk", typ: tar.TypeBlock, mode: 0o660, gid: 6, major: 7, minor: 300},
		{name: "./run/", typ: tar.TypeDir, mode: 0o755},
		{name: "./run/fifo", typ: tar.TypeFifo, mode: 0o620},
		{name: "./home/app/", typ: tar.TypeDir, mode: 0o750, uid: 1000, gid: 1000},
		{name: "./home/app/file", typ: tar.TypeReg, mode: 0o640, uid: 1000, gid: 1000, data: "mine\n"},
		{name: "./srv/", typ: tar.TypeDir, mode: 0o755},
		{name: "./evil/escaped.txt", typ: tar.TypeReg, mode: 0o644, data: "inside\n"},
	}
	l3 := []testEntry{
		{name: "./.wh.old", typ: tar.TypeReg},
		{name: "./etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "./etc/motd", typ: tar.TypeReg, mode: 0o644, data: "hi\n"},
		{name: "./opq/", typ: tar.TypeDir, mode: 0o711},
		{name: "./opq/sub/", typ: tar.TypeDir, mode: 0o700},
	}
	return [][]testEntry{l1, l2, l3}
}

func tarLayers(t testing.TB, layers [][]testEntry) [][]byte {
	var out [][]byte
	for _, l := range layers {
		out = append(out, layerTar(t, l))
	}
	return out
}

// importImage runs kbox import and fails the test unless it succeeds.
func importImage(t *testing.T, src, out string, extra ...string) {
	t.Helper()
	so, se, status := runKbox(t, append([]string{"import", src, "-o", out}, extra...)...)
	if status != 0 {
		t.Fatalf("kbox import %s: status %d\nstdout: %s\nstderr: %s", src, status, so, se)
	}
}

// guestStat runs busybox's stat on the paths in the image (raw root: no
// mounts over /dev or /tmp) and returns its lines by path.
func guestStat(t *testing.T, img string, paths []string) map[string]string {
	t.Helper()
	so, se, status := runKbox(t, append([]string{"image", "-r", img, "-0", "--", "/bin/stat", "-c", statFormat}, paths...)...)
	if status != 0 {
		t.Fatalf("guest stat: status %d\nstdout: %s\nstderr: %s", status, so, se)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(so), "\n") {
		got[strings.SplitN(l, "|", 2)[0]] = l
	}
	return got
}

func TestImportLayers(t *testing.T) {
	layers := layeredImage(t)
	im := testImage{layers: tarLayers(t, layers), config: map[string]any{}}
	dir := t.TempDir()
	layout := filepath.Join(dir, "layout")
	writeOCILayout(t, layout, im)
	out := filepath.Join(dir, "out.ext4")
	if _, err := os.Stat("/srv/escaped.txt"); err == nil {
		t.Fatal("/srv/escaped.txt exists on the host before the test")
	}
	importImage(t, layout, out)
	if _, err := os.Stat("/srv/escaped.txt"); err == nil {
		t.Error("the import wrote /srv/escaped.txt on the host")
	}
	checkLayered(t, out, layers)
}

// TestImportJournal: an image kbox builds has a journal, as a `make rootfs`
// image has, so a kbox killed after a guest's synced write leaves an image
// that the next read-write run recovers: the data is there, and the image
// is clean after that run (scratchfs wrote none: dumpe2fs showed no
// has_journal).
func TestImportJournal(t *testing.T) {
	dir := t.TempDir()
	layout := filepath.Join(dir, "layout")
	writeOCILayout(t, layout, testImage{layers: tarLayers(t, [][]testEntry{busyboxEntries(t)}), config: map[string]any{}})
	out := filepath.Join(dir, "out.ext4")
	importImage(t, layout, out)
	info, err := exec.Command("dumpe2fs", "-h", out).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Filesystem features:.*has_journal`).Match(info) || !strings.Contains(string(info), "Journal inode:            8") {
		t.Fatalf("the imported image has no journal (%v):\n%s", err, info)
	}
	k := startKbox(t, "image", "-r", out, "-0", "--", "/bin/sh", "-c",
		"busybox mkdir -p /root && busybox yes abcdefg | busybox head -c 4194304 > /root/f && busybox sync && echo synced && busybox sleep 100")
	if l := k.Line(); l != "synced" {
		t.Fatalf("guest said %q\n%s", l, k.Stderr())
	}
	k.cmd.Process.Signal(syscall.SIGKILL)
	if st := k.Wait(); st != 128+int(syscall.SIGKILL) {
		t.Fatalf("kbox ended with status %d, want killed\n%s", st, k.Stderr())
	}
	so, se, st := runKbox(t, "image", "-r", out, "-0", "--", "/bin/sh", "-c", "busybox wc -c < /root/f")
	if st != 0 || strings.TrimSpace(so) != "4194304" || strings.Contains(se, "recovery") {
		t.Errorf("after the kill: status %d, %q, want 4194304 bytes\n%s", st, so, se)
	}
	assertCleanImage(t, out)
}

// checkLayered checks an image made from layeredImage: e2fsck finds it
// clean, the guest sees the model's tree, debugfs agrees.
func checkLayered(t *testing.T, out string, layers [][]testEntry) {
	t.Helper()
	assertCleanImage(t, out)

	model := modelTree(layers)
	nlink := map[*modelFile]int{}
	var paths []string
	for p, f := range model {
		nlink[f]++
		if p != "/" {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	got := guestStat(t, out, paths)
	for _, p := range paths {
		f := model[p]
		want := f.statLine(p, nlink[f])
		g := got[p]
		if f.typ == tar.TypeDir { // size and link count vary with the filesystem
			if parts := strings.Split(g, "|"); len(parts) == 9 {
				parts[5], parts[6] = "-", "0"
				g = strings.Join(parts, "|")
			}
		}
		if g != want {
			t.Errorf("%s:\n got  %q\n want %q", p, g, want)
		}
	}
	// Nothing else is there: the whiteouts' and the opaque directory's
	// victims are gone, and nothing escaped the root.
	so, se, status := runKbox(t, "image", "-r", out, "-0", "--", "/bin/find", "/", "-xdev")
	if status != 0 {
		t.Fatalf("guest find: %d %s %s", status, so, se)
	}
	var extra []string
	for _, l := range strings.Split(strings.TrimSpace(so), "\n") {
		if model[l] == nil && l != "/lost+found" {
			extra = append(extra, l)
		}
	}
	if len(extra) > 0 {
		t.Errorf("the guest sees paths the layers do not leave: %q", extra)
	}
	for _, c := range []struct{ path, want string }{
		{"/data/hard.txt", "one\n"}, {"/opq/new.txt", "new\n"}, {"/srv/escaped.txt", "inside\n"}, {"/home/app/file", "mine\n"},
	} {
		if so, _, _ := runKbox(t, "image", "-r", out, "-0", "--", "/bin/cat", c.path); so != c.want {
			t.Errorf("cat %s: %q, want %q", c.path, so, c.want)
		}
	}
	// The hard link is one inode with two names; debugfs agrees on the
	// extended attribute and the device numbers.
	so, _, _ = runKbox(t, "image", "-r", out, "-0", "--", "/bin/stat", "-c", "%i", "/data/f1.txt", "/data/hard.txt")
	if ino := strings.Fields(so); len(ino) != 2 || ino[0] != ino[1] {
		t.Errorf("hard link: inodes %q, want one inode twice", so)
	}
	if b, err := exec.Command("debugfs", "-R", "ea_get /data/x.txt user.kbox", out).CombinedOutput(); err != nil || !strings.Contains(string(b), "hello") {
		t.Errorf("debugfs ea_get user.kbox: %v %s", err, b)
	}
	if b, _ := exec.Command("debugfs", "-R", "ea_list /sbin/capped", out).CombinedOutput(); !strings.Contains(string(b), `security.capability (20) = 01 00 00 02 00 04 00 00`) {
		t.Errorf("debugfs ea_list /sbin/capped: want the file capability:\n%s", b)
	}
	if b, _ := exec.Command("debugfs", "-R", "stat /dev/myblk", out).CombinedOutput(); !strings.Contains(string(b), "Device major/minor number: 07:300") {
		t.Errorf("debugfs stat /dev/myblk: want major 7 minor 300:\n%s", b)
	}
}

// TestImportFormats: a docker save tarball, an OCI layout directory, an
// OCI layout in a tar, each of them compressed, and a plain rootfs
// tarball (gzipped) of one tree give the same file tree.
func TestImportFormats(t *testing.T) {
	layers := layeredImage(t)
	im := testImage{layers: tarLayers(t, layers), config: map[string]any{}}
	dir := t.TempDir()
	layout := filepath.Join(dir, "layout")
	writeOCILayout(t, layout, im)
	save := filepath.Join(dir, "save.tar")
	writeDockerSave(t, save, im)
	layoutTar := filepath.Join(dir, "layout.tar")
	if b, err := exec.Command("tar", "-C", layout, "-cf", layoutTar, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, b)
	}
	// `docker save IMAGE | gzip` and an OCI layout's tar through zstd: the
	// archive is the image, not a root filesystem (kbox took them for a
	// plain rootfs tarball of manifest.json and blobs).
	saveGz := filepath.Join(dir, "save.tar.gz")
	if b, err := os.ReadFile(save); err != nil || os.WriteFile(saveGz, gzipBytes(b), 0o644) != nil {
		t.Fatal(err)
	}
	layoutZst := filepath.Join(dir, "layout.tar.zst")
	if lb, err := os.ReadFile(layoutTar); err == nil {
		var zb bytes.Buffer
		zw, _ := zstd.NewWriter(&zb)
		zw.Write(lb)
		zw.Close()
		os.WriteFile(layoutZst, zb.Bytes(), 0o644)
	}
	listing := func(img string) string {
		so, se, status := runKbox(t, "image", "-r", img, "-0", "--", "/bin/sh", "-c", "find / -xdev | sort | while read p; do stat -c '"+statFormat+"' \"$p\"; done")
		if status != 0 {
			t.Fatalf("listing %s: %d %s", img, status, se)
		}
		var keep []string
		for _, l := range strings.Split(so, "\n") {
			f := strings.Split(l, "|")
			if len(f) == 9 && f[1] == "directory" {
				f[5], f[6] = "-", "-"
				if f[0] == "/" || f[0] == "/lost+found" {
					f[8] = "-"
				}
			}
			keep = append(keep, strings.Join(f, "|"))
		}
		return strings.Join(keep, "\n")
	}
	var first string
	for i, src := range []string{layout, save, layoutTar, saveGz, layoutZst} {
		out := filepath.Join(dir, fmt.Sprintf("out%d.ext4", i))
		importImage(t, src, out)
		l := listing(out)
		if i == 0 {
			first = l
			continue
		}
		if l != first {
			t.Errorf("%s gives another tree than %s:\n%s\n---\n%s", src, layout, l, first)
		}
	}
	// A plain rootfs tarball, gzipped or zstd-compressed: one layer,
	// taken as it is.
	tree := layerTar(t, busyboxEntries(t))
	var zbuf bytes.Buffer
	zw, _ := zstd.NewWriter(&zbuf)
	zw.Write(tree)
	zw.Close()
	for name, data := range map[string][]byte{"rootfs.tar.gz": gzipBytes(tree), "rootfs.tar.zst": zbuf.Bytes()} {
		plain := filepath.Join(dir, name)
		os.WriteFile(plain, data, 0o644)
		out := filepath.Join(dir, name+".ext4")
		importImage(t, plain, out)
		if so, se, status := runKbox(t, "image", "-S", out, "--", "/bin/sh", "-c", "echo plain; cat /etc/group"); status != 0 || !strings.HasPrefix(so, "plain\nroot:x:0:\nstaff") {
			t.Errorf("%s: %d %q %s", name, status, so, se)
		}
		assertCleanImage(t, out)
	}
}

// TestImportConfig: the image's Entrypoint, Cmd, Env, WorkingDir and User
// (by name, through the image's /etc/passwd and /etc/group) are kbox
// image's defaults; the command line overrides them as docker run's does.
func TestImportConfig(t *testing.T) {
	script := `echo "ep $(id -u):$(id -g) $(pwd) $FOO $HOME $*"`
	im := testImage{layers: tarLayers(t, [][]testEntry{busyboxEntries(t), {
		{name: "./home/", typ: tar.TypeDir, mode: 0o755},
		{name: "./home/app/", typ: tar.TypeDir, mode: 0o755, uid: 1000, gid: 1000},
	}}), config: map[string]any{
		"Entrypoint": []string{"/bin/sh", "-c", script, "ep"},
		"Cmd":        []string{"c1", "c2"},
		"Env":        []string{"FOO=bar", "PATH=/bin"},
		"WorkingDir": "/work/dir",
		"User":       "app:staff",
	}}
	dir := t.TempDir()
	layout := filepath.Join(dir, "layout")
	writeOCILayout(t, layout, im)
	out := filepath.Join(dir, "out.ext4")
	importImage(t, layout, out)
	assertCleanImage(t, out)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"defaults", nil, "ep 1000:50 /work/dir bar /home/app c1 c2\n"},
		{"args replace Cmd", []string{"--", "x", "y"}, "ep 1000:50 /work/dir bar /home/app x y\n"},
		{"-w and -0", []string{"-w", "/", "-0", "--", "z"}, "ep 0:0 / bar /root z\n"},
		{"--change-id", []string{"--change-id", "7:8"}, "ep 7:8 /work/dir bar / c1 c2\n"},
		{"-c runs alone", []string{"-c", "echo $FOO; pwd"}, "bar\n/work/dir\n"},
		{"--entrypoint", []string{"--entrypoint", "/bin/echo", "--", "e", "$FOO"}, "e $FOO\n"},
		{"--entrypoint alone", []string{"--entrypoint", "/bin/pwd"}, "/work/dir\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"image", "-S", out}
			if c.name == "--change-id" {
				args[1] = "-R" // -S is root identity
			}
			so, se, status := runKbox(t, append(args, c.args...)...)
			if status != 0 || so != c.want {
				t.Errorf("kbox %q: status %d, stdout %q, want %q\nstderr: %s", args, status, so, c.want, se)
			}
		})
	}
}

// TestImportRefused: bad input gets a clear error, exit status 125 (2 for
// a bad command line), and leaves no file in the output's directory.
func TestImportRefused(t *testing.T) {
	bb := busyboxEntries(t)
	dir := t.TempDir()
	layoutOf := func(name string, layers ...[]testEntry) string {
		p := filepath.Join(dir, name)
		writeOCILayout(t, p, testImage{layers: tarLayers(t, layers), config: map[string]any{}})
		return p
	}
	escape := layoutOf("escape", bb, []testEntry{{name: "../../etc/x", typ: tar.TypeReg, mode: 0o644, data: "x"}})
	linkEscape := layoutOf("linkescape", bb, []testEntry{{name: "./l", typ: tar.TypeLink, link: "../../../etc/passwd"}})
	mismatch := layoutOf("mismatch", bb, []testEntry{{name: "./f", typ: tar.TypeReg, mode: 0o644, data: "f"}})
	// Change the second layer's blob after the fact: its digest no longer
	// matches the manifest's.
	blobs, _ := filepath.Glob(filepath.Join(mismatch, "blobs", "sha256", "*"))
	corrupted := false
	for _, b := range blobs {
		data, _ := os.ReadFile(b)
		if string(data) == string(gzipBytes(layerTar(t, []testEntry{{name: "./f", typ: tar.TypeReg, mode: 0o644, data: "f"}}))) {
			os.WriteFile(b, gzipBytes(layerTar(t, []testEntry{{name: "./f", typ: tar.TypeReg, mode: 0o644, data: "g"}})), 0o644)
			corrupted = true
		}
	}
	if !corrupted {
		t.Fatal("did not find the layer to corrupt")
	}
	truncated := filepath.Join(dir, "truncated.tar.gz")
	whole := gzipBytes(layerTar(t, bb))
	os.WriteFile(truncated, whole[:len(whole)/2], 0o644)
	notTar := filepath.Join(dir, "nottar")
	os.WriteFile(notTar, []byte(strings.Repeat("not a tar archive\n", 100)), 0o644)
	saveGz := filepath.Join(dir, "save.tar.gz")
	writeDockerSave(t, saveGz, testImage{layers: tarLayers(t, [][]testEntry{bb}), config: map[string]any{}})
	b, _ := os.ReadFile(saveGz)
	gz := gzipBytes(b)
	os.WriteFile(saveGz, gz[:len(gz)*2/3], 0o644) // cut: its manifest.json is at the end
	outDir, out := importOut(dir)
	for _, c := range []importCase{
		{"dotdot entry", []string{escape}, 125, `entry "../../etc/x": its ".." leaves the image's root: refused`},
		{"dotdot hard link", []string{linkEscape}, 125, `entry "../../../etc/passwd": its ".." leaves the image's root`},
		{"digest mismatch", []string{mismatch}, 125, "layer 2 of 2 (sha256:"},
		{"truncated layer", []string{truncated}, 125, "truncated"},
		{"not a tar", []string{notTar}, 125, "not a tar archive"},
		{"truncated gzipped docker save", []string{saveGz}, 125, "truncated"},
		{"too small", []string{layoutOf("big", bb), "--size", "2M"}, 125, "the image is full"},
		{"no such source", []string{filepath.Join(dir, "nothing")}, 125, "no such file"},
		{"no output", nil, 2, "give one FILE or DIR and -o OUT.ext4"},
		{"bad platform", []string{escape, "--platform", "linux"}, 2, "bad platform"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"import"}, c.args...)
			if c.name != "no output" {
				args = append(args, "-o", out)
			}
			// kbox's own temporary directory stays empty too.
			tmp := t.TempDir()
			so, se, status := runKboxEnv(t, kboxEnv{vars: []string{"TMPDIR=" + tmp}}, args...)
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("files left in TMPDIR: %v", left)
			}
			if status != c.status || !strings.Contains(se, c.want) {
				t.Errorf("kbox %q: status %d, stderr %q; want status %d and %q (stdout %q)", args, status, se, c.status, c.want, so)
			}
			if c.name == "digest mismatch" && !strings.Contains(se, "digest mismatch") {
				t.Errorf("stderr %q does not say digest mismatch", se)
			}
			if left, _ := os.ReadDir(outDir); len(left) != 0 {
				t.Errorf("files left in the output's directory: %v", left)
			}
		})
	}
}

// TestImportAsNonRoot: a host user without privileges imports an image
// that keeps owners, a set-user-id bit and a device node: the kernel sets
// them, not the host. Run as root, the test drops to uid 65534 (setpriv).
func TestImportAsNonRoot(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // the test's own temporary directory
	os.Chmod(dir, 0o777)
	src := filepath.Join(dir, "rootfs.tar")
	os.WriteFile(src, layerTar(t, append(busyboxEntries(t),
		testEntry{name: "./dev/", typ: tar.TypeDir, mode: 0o755},
		testEntry{name: "./dev/null2", typ: tar.TypeChar, mode: 0o666, major: 1, minor: 3},
		testEntry{name: "./owned", typ: tar.TypeReg, mode: 0o4750, uid: 1000, gid: 1000, data: "x\n"},
	)), 0o644)
	out := filepath.Join(dir, "out.ext4")
	args := []string{kboxBin(t), "import", src, "-o", out}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("SKIP (runs as root and needs setpriv to drop privileges): apt-get install util-linux")
		}
		args = append([]string{"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q: %v\n%s", args, err, b)
	}
	if fi, err := os.Stat(out); err != nil || fi.Sys().(*syscall.Stat_t).Uid == 0 && os.Geteuid() == 0 {
		t.Fatalf("%s: %v (want it made by uid 65534)", out, err)
	}
	for _, c := range []struct{ path, want string }{
		{"/owned", "104750 (1)   1000   1000"},    // (1): a regular file
		{"/dev/null2", "20666 (3)      0      0"}, // (3): debugfs's file type, a character device
	} {
		dirPath, name := path.Split(c.path)
		b, _ := exec.Command("debugfs", "-R", "ls -l "+dirPath, out).CombinedOutput()
		found := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(strings.TrimSpace(l), " "+name) {
				found = strings.Contains(l, c.want)
				if !found {
					t.Errorf("debugfs: %s: %q, want %q", c.path, l, c.want)
				}
			}
		}
		if !found {
			t.Errorf("debugfs ls %s: no %s with %q:\n%s", dirPath, name, c.want, b)
		}
	}
	assertCleanImage(t, out)
}
