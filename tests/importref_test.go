//go:build lkl

package tests

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kbox import of a docker save or an OCI layout that holds several
// images: --ref picks one by its tag (docs/images.md).

// namedImage is an image and the name a docker save or a layout gives it.
type namedImage struct {
	name string
	im   testImage
}

// writeDockerSaveNamed writes the images as one `docker save A B` does:
// an entry of manifest.json each, with its RepoTags.
func writeDockerSaveNamed(t *testing.T, path string, ims ...namedImage) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: baseTime})
		tw.Write(b)
	}
	var entries []map[string]any
	for n, ni := range ims {
		_, c, _ := ni.im.blobs(t)
		cname := strings.TrimPrefix(digestOf(c.data), "sha256:") + ".json"
		var names []string
		for i, l := range ni.im.layers {
			id := fmt.Sprintf("%064x", 100*n+i+1)
			add(id+"/layer.tar", l)
			names = append(names, id+"/layer.tar")
		}
		add(cname, c.data)
		entries = append(entries, map[string]any{"Config": cname, "RepoTags": []string{ni.name}, "Layers": names})
	}
	mf, _ := json.Marshal(entries)
	add("manifest.json", mf)
	tw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeOCILayoutNamed writes the images as an OCI layout whose index
// names each (org.opencontainers.image.ref.name) with its platform.
func writeOCILayoutNamed(t *testing.T, dir string, ims ...namedImage) {
	t.Helper()
	var descs []map[string]any
	for _, ni := range ims {
		m, c, ls := ni.im.blobs(t)
		for _, b := range append([]blob{m, c}, ls...) {
			writeBlob(t, dir, b.data)
		}
		d := m.desc()
		d["annotations"] = map[string]string{"org.opencontainers.image.ref.name": ni.name}
		d["platform"] = map[string]any{"os": "linux", "architecture": ni.im.archOrHost()}
		descs = append(descs, d)
	}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": descs})
	os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

// TestImportSeveral: a docker save or an OCI layout of two images needs
// --ref: it takes the image of that tag; without it, or with a tag it
// lacks, the error lists the tags (exit 2) and no image is made. A file
// of one image imports without --ref, as before.
func TestImportSeveral(t *testing.T) {
	dir := t.TempDir()
	a := namedImage{"kbox/a:1", markerImage(t, "", "a")}
	b := namedImage{"kbox/b:2", markerImage(t, "", "b")}
	save := filepath.Join(dir, "save.tar")
	writeDockerSaveNamed(t, save, a, b)
	layout := filepath.Join(dir, "layout")
	writeOCILayoutNamed(t, layout, a, b)
	one := filepath.Join(dir, "one.tar")
	writeDockerSaveNamed(t, one, a)
	rootfsTar := filepath.Join(dir, "rootfs.tar")
	os.WriteFile(rootfsTar, layerTar(t, busyboxEntries(t)), 0o644)
	outDir, out := importOut(dir)
	runImportCases(t, outDir, out, []importCase{
		{"save, --ref", []string{save, "--ref", "kbox/b:2"}, 0, "b"},
		{"save, --ref in full", []string{save, "--ref", "docker.io/kbox/a:1"}, 0, "a"},
		{"save, no --ref", []string{save}, 2, "the docker save holds 2 images: kbox/a:1, kbox/b:2; choose one with --ref"},
		{"save, a tag it lacks", []string{save, "--ref", "kbox/c:3"}, 2, "no image kbox/c:3 in the docker save; it holds kbox/a:1, kbox/b:2"},
		{"layout, --ref", []string{layout, "--ref=kbox/b:2"}, 0, "b"},
		{"layout, no --ref", []string{layout}, 2, "the OCI layout holds 2 images: kbox/a:1, kbox/b:2; choose one with --ref"},
		{"layout, a tag it lacks", []string{layout, "--ref", "kbox/a:2"}, 2, "no image kbox/a:2 in the OCI layout"},
		{"one image", []string{one}, 0, "a"},
		{"one image, its tag", []string{one, "--ref", "kbox/a:1"}, 0, "a"},
		{"one image, another tag", []string{one, "--ref", "kbox/b:2"}, 2, "no image kbox/b:2 in the docker save; it holds kbox/a:1"},
		{"plain tarball, --ref", []string{rootfsTar, "--ref", "kbox/a:1"}, 2, "a plain root filesystem tarball is one image"},
		{"--ref without a name", []string{save, "--ref="}, 2, "--ref: want an image name"},
	})
}

// TestImportSignal: an import stopped by SIGINT or SIGTERM while it
// builds leaves neither OUT nor its temporary file, and says so.
func TestImportSignal(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "rootfs.tar")
	big := strings.Repeat("kbox", 48<<20/4) // 48 MB for the build to be under way a while
	os.WriteFile(src, layerTar(t, append(busyboxEntries(t), testEntry{name: "./big", typ: tar.TypeReg, mode: 0o644, data: big})), 0o644)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			outDir := t.TempDir()
			out := filepath.Join(outDir, "out.ext4")
			cmd := exec.Command(kboxBin(t), "import", src, "-o", out)
			var se bytes.Buffer
			cmd.Stderr = &se
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait for the temporary image, then signal.
			deadline := time.Now().Add(60 * time.Second)
			for {
				if tmps, _ := filepath.Glob(filepath.Join(outDir, ".out.ext4.tmp-*")); len(tmps) > 0 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("no temporary image in %s within 60 s; stderr %q", outDir, se.String())
				}
				time.Sleep(2 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			status := -1
			if ee, ok := err.(*exec.ExitError); ok {
				status = ee.ExitCode()
			}
			if status != 128+int(sig) || !strings.Contains(se.String(), "stopped, "+out+" not made") {
				t.Errorf("status %d (err %v), stderr %q; want %d and a note that OUT is not made", status, err, se.String(), 128+int(sig))
			}
			if left, _ := os.ReadDir(outDir); len(left) != 0 {
				t.Errorf("files left in the output's directory: %v", left)
			}
		})
	}
}

// TestImportSetuidNotHonoured: an image's set-user-id-root program and
// its file capability are stored (TestImportLayers) but not honoured at
// exec: run as the image's User, a program gets no capabilities from
// either, as in a container with no-new-privileges (docs/images.md).
func TestImportSetuidNotHonoured(t *testing.T) {
	img := imagePath(t)
	prog := filepath.Join(t.TempDir(), "creds")
	if b, err := exec.Command("debugfs", "-R", "dump /opt/tests/creds "+prog, img).CombinedOutput(); err != nil {
		t.Fatalf("debugfs dump /opt/tests/creds: %v %s", err, b)
	}
	bin, err := os.ReadFile(prog)
	if err != nil || len(bin) == 0 {
		t.Fatalf("no /opt/tests/creds in %s: %v", img, err)
	}
	im := testImage{layers: tarLayers(t, [][]testEntry{busyboxEntries(t), {
		{name: "./bin/creds", typ: tar.TypeReg, mode: 0o755, data: string(bin)},
		{name: "./bin/suidcreds", typ: tar.TypeReg, mode: 0o4755, data: string(bin)},
		{name: "./bin/capcreds", typ: tar.TypeReg, mode: 0o755, data: string(bin), xattrs: map[string]string{"security.capability": fileCap}},
	}}), config: map[string]any{"User": "app"}}
	layout := filepath.Join(t.TempDir(), "layout")
	writeOCILayout(t, layout, im)
	out := filepath.Join(t.TempDir(), "out.ext4")
	importImage(t, layout, out)
	so, se, status := runKbox(t, "image", "-S", out, "--", "/bin/sh", "-c", "id -u; /bin/creds caps; /bin/suidcreds caps; /bin/capcreds caps")
	// The ids stay the user's (no set-user-id), the sets empty.
	none := "res uid 1000 1000 1000 getuid 1000 geteuid 1000\nres gid 1000 1000 1000 getgid 1000 getegid 1000\ngroups 1: 1000\ncap eff 0 perm 0 inh 0\n"
	if want := "1000\n" + none + none + none; status != 0 || so != want {
		t.Errorf("status %d, stdout %q, want %q (stderr %s)", status, so, want, se)
	}
	// As root (-0) the same programs have root's capabilities: the test
	// can tell capabilities apart.
	if so, _, _ := runKbox(t, "image", "-S", out, "-0", "--", "/bin/creds", "caps"); !strings.Contains(so, "geteuid 0\n") || strings.Contains(so, "cap eff 0 ") {
		t.Errorf("as root: %q, want uid 0 and capabilities", so)
	}
}

// TestImportPlatform: a layout's entries for several platforms are chosen
// among by --platform (the host's by default), also within the entries of
// the name --ref gives.
func TestImportPlatform(t *testing.T) {
	dir := t.TempDir()
	other := "riscv64"
	plain := filepath.Join(dir, "plain")
	writeOCILayout(t, plain, markerImage(t, other, "other"), markerImage(t, "", "host"))
	named := filepath.Join(dir, "named")
	writeOCILayoutNamed(t, named, namedImage{"kbox/m:1", markerImage(t, other, "m-other")},
		namedImage{"kbox/m:1", markerImage(t, "", "m-host")}, namedImage{"kbox/n:1", markerImage(t, "", "n-host")})
	outDir, out := importOut(dir)
	runImportCases(t, outDir, out, []importCase{
		{"host's", []string{plain}, 0, "host"},
		{"--platform", []string{plain, "--platform", "linux/" + other}, 0, "other"},
		{"a platform it lacks", []string{plain, "--platform", "linux/mips64le"}, 125, "no image for linux/mips64le: the index has linux/" + other},
		{"named, no --ref", []string{named}, 2, "the OCI layout holds 2 images: kbox/m:1, kbox/n:1; choose one with --ref"},
		{"named, --ref", []string{named, "--ref", "kbox/m:1"}, 0, "m-host"},
		{"named, --ref and --platform", []string{named, "--ref", "kbox/m:1", "--platform", "linux/" + other}, 0, "m-other"},
		{"named, --ref and a platform it lacks", []string{named, "--ref", "kbox/n:1", "--platform", "linux/" + other}, 125, "--platform linux/" + other + " is not among them"},
	})
}
