//go:build lkl

package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A session's disk is its image under a stack of layers (package
// sessiondir): a checkpoint seals the top one, a rollback goes back to a
// checkpoint's chain, a fork links the source's sealed layers. Nothing is
// copied (docs/agents.md, "Checkpoint, rollback, fork").

// diskBytes is the host space the files under dirs take, each inode
// counted once (a fork's hard links share their source's).
func diskBytes(t *testing.T, dirs ...string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var n int64
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return nil
			}
			var st syscall.Stat_t
			if syscall.Lstat(p, &st) == nil && !seen[st.Ino] {
				seen[st.Ino] = true
				n += st.Blocks * 512
			}
			return nil
		})
	}
	return n
}

// written is what a session writes before its first checkpoint: 8 MiB,
// which a checkpoint or a fork that copied would copy.
const written = 8 << 20

// sessionOut runs a shell command in the session in dir and returns its
// stdout.
func sessionOut(t *testing.T, dir, cmd string) string {
	t.Helper()
	out, _ := sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", cmd)
	return out
}

// TestSessionCheckpointTree: checkpoints taken after 8 MiB written take
// no room of their size; rollbacks go to any checkpoint in any order (a
// tree: c3 is taken after a rollback to c1), each showing exactly its
// state; the saved image is a clean file system with the last state.
func TestSessionCheckpointTree(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	dir := filepath.Join(t.TempDir(), "s")
	closeOnFailure(t, dir)
	sessionCLI(t, "", 0, "open", "-S", img, dir)
	sessionOut(t, dir, "head -c 8388608 /dev/urandom > /root/big; echo 1 > /root/v; sync")
	sum := sessionOut(t, dir, "md5sum /root/big")

	used := diskBytes(t, dir)
	sessionCLI(t, "", 0, "checkpoint", dir, "c1")
	if grown := diskBytes(t, dir) - used; grown > written/8 {
		t.Errorf("checkpoint c1 after %d bytes written took %d bytes more on the host: it copied", written, grown)
	}
	sessionOut(t, dir, "echo 2 > /root/v; rm /root/big")
	sessionCLI(t, "", 0, "checkpoint", dir, "c2")
	sessionOut(t, dir, "echo 3 > /root/v; echo x > /root/only3")

	check := func(when, want string, big bool) {
		t.Helper()
		got := sessionOut(t, dir, "cat /root/v; md5sum /root/big 2>/dev/null || echo no-big; cat /root/only3 2>/dev/null || echo no-only3")
		w := want + "\n"
		if big {
			w += sum
		} else {
			w += "no-big\n"
		}
		w += "no-only3\n"
		if got != w {
			t.Errorf("%s: got %q, want %q", when, got, w)
		}
	}
	sessionCLI(t, "", 0, "rollback", dir, "c1")
	check("after the rollback to c1", "1", true)
	sessionOut(t, dir, "echo 1b > /root/v; echo y > /root/w")
	sessionCLI(t, "", 0, "checkpoint", dir, "c3")
	sessionCLI(t, "", 0, "rollback", dir, "c2")
	check("after the rollback to c2", "2", false)
	if out := sessionOut(t, dir, "cat /root/w 2>/dev/null || echo no-w"); out != "no-w\n" {
		t.Errorf("c2 sees c3's /root/w: %q", out)
	}
	sessionCLI(t, "", 0, "rollback", dir, "c3")
	check("after the rollback to c3", "1b", true)
	sessionCLI(t, "", 0, "rollback", dir, "c1")
	check("after the second rollback to c1", "1", true)

	// A checkpoint with nothing written since the last one, and one
	// whose kbox is then killed: the rollback still brings it back.
	sessionCLI(t, "", 0, "checkpoint", dir, "c4")
	sessionOut(t, dir, "echo 4 > /root/v")
	sessionCLI(t, "", 0, "checkpoint", dir, "c5")
	sessionOut(t, dir, "echo lost > /root/v")
	pid := sessionPid(t, dir)
	syscall.Kill(pid, syscall.SIGKILL)
	if !pidEnds(pid) {
		t.Fatalf("kbox %d survived SIGKILL", pid)
	}
	sessionCLI(t, "", 0, "rollback", dir, "c5")
	if out := sessionOut(t, dir, "cat /root/v"); out != "4\n" {
		t.Errorf("after the kill and the rollback to c5: %q", out)
	}
	sessionCLI(t, "", 0, "rollback", dir, "c4")
	check("after the rollback to c4", "1", true)

	saved := filepath.Join(t.TempDir(), "saved.ext4")
	sessionCLI(t, "", 0, "close", dir, "--save", saved)
	assertCleanImage(t, saved)
	if got, ok := debugfsCat(t, saved, "/root/v"); !ok || got != "1\n" {
		t.Errorf("the saved image's /root/v: %q %v", got, ok)
	}
	if fileSum(t, img) != before {
		t.Errorf("the base image changed")
	}
}

// TestSessionForkShares: a fork after 8 MiB written takes no room of
// their size (it shares its source's sealed layers); the two then
// diverge both ways, the fork outlives its source's close, and both
// saved images are clean with their own state.
func TestSessionForkShares(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	top := t.TempDir()
	dir, fork := filepath.Join(top, "s"), filepath.Join(top, "f")
	closeOnFailure(t, dir)
	closeOnFailure(t, fork)
	sessionCLI(t, "", 0, "open", "-S", img, dir)
	sessionOut(t, dir, "head -c 8388608 /dev/urandom > /root/big; echo src > /root/v")
	sessionCLI(t, "", 0, "checkpoint", dir, "c1")
	sessionOut(t, dir, "echo src2 > /root/v; sync")

	used := diskBytes(t, dir)
	sessionCLI(t, "", 0, "fork", dir, fork)
	if grown := diskBytes(t, dir, fork) - used; grown > written/8 {
		t.Errorf("the fork after %d bytes written took %d bytes more on the host: it copied", written, grown)
	}
	sum := sessionOut(t, dir, "md5sum /root/big")
	if out := sessionOut(t, fork, "cat /root/v; md5sum /root/big"); out != "src2\n"+sum {
		t.Errorf("the fork at its start: %q", out)
	}

	// Both ways: each writes, neither sees the other's writes.
	sessionOut(t, dir, "echo src3 > /root/v; echo a > /root/from-src; rm /root/big")
	sessionOut(t, fork, "echo fork > /root/v; echo b > /root/from-fork")
	if out := sessionOut(t, dir, "cat /root/v /root/from-src; cat /root/from-fork 2>/dev/null || echo none; test -e /root/big || echo no-big"); out != "src3\na\nnone\nno-big\n" {
		t.Errorf("the source after both wrote: %q", out)
	}
	if out := sessionOut(t, fork, "cat /root/v /root/from-fork; cat /root/from-src 2>/dev/null || echo none; md5sum /root/big"); out != "fork\nb\nnone\n"+sum {
		t.Errorf("the fork after both wrote: %q", out)
	}
	// The source's rollback and close leave the fork's layers.
	sessionCLI(t, "", 0, "rollback", dir, "c1")
	savedSrc := filepath.Join(top, "src.ext4")
	sessionCLI(t, "", 0, "close", dir, "--save", savedSrc)
	if out := sessionOut(t, fork, "cat /root/v; md5sum /root/big"); out != "fork\n"+sum {
		t.Errorf("the fork after its source closed: %q", out)
	}
	savedFork := filepath.Join(top, "fork.ext4")
	sessionCLI(t, "", 0, "close", fork, "--save", savedFork)
	for path, want := range map[string]string{savedSrc: "src\n", savedFork: "fork\n"} {
		assertCleanImage(t, path)
		if got, ok := debugfsCat(t, path, "/root/v"); !ok || got != want {
			t.Errorf("%s's /root/v: %q %v, want %q", filepath.Base(path), got, ok, want)
		}
	}
	if got, ok := debugfsCat(t, savedSrc, "/root/from-src"); ok || strings.TrimSpace(got) != "" {
		t.Errorf("the source's saved image has /root/from-src, written after c1: %q", got)
	}
	if fileSum(t, img) != before {
		t.Errorf("the base image changed")
	}
	if _, err := os.Stat(fork); !os.IsNotExist(err) {
		t.Errorf("%s after close: %v", fork, err)
	}
}
