//go:build lkl

package tests

import (
	"archive/tar"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkImages: a 100 MB image (three layers of files, half of them
// random bytes, half text) pulled from Debian's docker-registry on
// 127.0.0.1 with an empty cache and built into ext4 (`kbox pull`), its
// `docker save` tarball imported (`kbox import`), and the same tree made
// into an image of the same size by `mke2fs -d` from a directory, the
// floor of a formatter that needs no kernel (but root to keep owners).
// Median of three runs each, in MB of layer content per second, and the
// ratio of kbox's time to mke2fs's.
func BenchmarkImages(b *testing.B) {
	mke2fs, err := exec.LookPath("mke2fs")
	if err != nil {
		b.Skip("SKIP (needs mke2fs from e2fsprogs): no floor to compare with")
	}
	base := startRegistry(b)
	layers, tree, content := benchLayers(b, 100<<20)
	im := testImage{layers: layers, config: map[string]any{"Cmd": []string{"/bin/true"}}}
	pushImage(b, base, "bench/big", "v1", im)
	dir := b.TempDir()
	save := filepath.Join(dir, "save.tar")
	writeDockerSave(b, save, im)
	src := filepath.Join(dir, "tree")
	writeTree(b, src, tree)
	mb := float64(content) / 1e6
	ref := strings.TrimPrefix(base, "http://") + "/bench/big:v1"

	timed := func(name string, run func(out string) error) float64 {
		var v []float64
		for i := 0; i < 3; i++ {
			out := filepath.Join(dir, fmt.Sprintf("%s%d.ext4", name, i))
			t0 := time.Now()
			if err := run(out); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			v = append(v, time.Since(t0).Seconds())
			os.Remove(out)
		}
		return median(v)
	}
	var size int64
	pull := timed("pull", func(out string) error {
		env, _ := pullEnv(b) // an empty cache every time
		if so, se, st := runKboxEnv(b, env, "pull", ref, "-o", out); st != 0 {
			return fmt.Errorf("status %d\n%s%s", st, so, se)
		}
		fi, err := os.Stat(out)
		if err == nil {
			size = fi.Size()
		}
		return err
	})
	imp := timed("import", func(out string) error {
		if so, se, st := runKbox(b, "import", save, "-o", out); st != 0 {
			return fmt.Errorf("status %d\n%s%s", st, so, se)
		}
		return nil
	})
	floor := timed("mke2fs", func(out string) error {
		o, err := exec.Command(mke2fs, "-q", "-t", "ext4", "-d", src, "-F", out, fmt.Sprintf("%dk", size/1024)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v\n%s", err, o)
		}
		return nil
	})
	b.Logf("%.0f MB in %d layers, image %d MiB: pull %.2f s (%.1f MB/s), import %.2f s (%.1f MB/s), mke2fs -d %.2f s (%.1f MB/s)",
		mb, len(layers), size>>20, pull, mb/pull, imp, mb/imp, floor, mb/floor)
	b.ReportMetric(mb/pull, "pull_MBps")
	b.ReportMetric(mb/imp, "import_MBps")
	b.ReportMetric(mb/floor, "mke2fs_d_MBps")
	b.ReportMetric(pull/floor, "pull_vs_mke2fs_ratio")
	b.ReportMetric(imp/floor, "import_vs_mke2fs_ratio")
	b.ReportMetric(0, "ns/op")
}

// benchLayers makes three layers of about total bytes of files (1 MiB
// each, odd ones random bytes, even ones lines of text) and returns them,
// their entries and the content's size.
func benchLayers(b *testing.B, total int) ([][]byte, []testEntry, int) {
	r := rand.New(rand.NewSource(1))
	var layers [][]byte
	var all []testEntry
	size := 0
	for l := 0; l < 3; l++ {
		d := fmt.Sprintf("./layer%d/", l)
		entries := []testEntry{{name: d, typ: tar.TypeDir, mode: 0o755}}
		for i := 0; size < total*(l+1)/3; i++ {
			buf := make([]byte, 1<<20)
			if i%2 == 1 {
				r.Read(buf)
			} else {
				var sb strings.Builder
				for n := 0; sb.Len() < len(buf); n++ {
					fmt.Fprintf(&sb, "line %d of file %d of layer %d: some text a program might hold\n", n, i, l)
				}
				copy(buf, sb.String())
			}
			entries = append(entries, testEntry{name: fmt.Sprintf("%sf%03d", d, i), typ: tar.TypeReg, mode: 0o644, data: string(buf)})
			size += len(buf)
		}
		layers = append(layers, layerTar(b, entries))
		all = append(all, entries...)
	}
	return layers, all, size
}

// writeTree writes entries (directories and regular files) under dir.
func writeTree(b *testing.B, dir string, entries []testEntry) {
	for _, e := range entries {
		p := filepath.Join(dir, e.name)
		var err error
		if e.typ == tar.TypeDir {
			err = os.MkdirAll(p, os.FileMode(e.mode))
		} else {
			err = os.WriteFile(p, []byte(e.data), os.FileMode(e.mode))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
