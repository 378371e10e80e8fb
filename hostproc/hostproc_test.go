package hostproc

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRead: Read gives what os.ReadFile gives, for a file of /proc of a
// few bytes, one of several KB read in more than one call, and an empty
// one; a missing file is an error.
func TestRead(t *testing.T) {
	for _, p := range []string{"/proc/self/stat", "/proc/self/status", "/proc/self/maps", "/proc/self/environ", "/proc/self/auxv"} {
		got, err := Read(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// stat and status name the reading task's state and counters, maps
		// its mappings: compare their shape for those.
		switch p {
		case "/proc/self/stat":
			if f := strings.Fields(string(got)); f[0] != strconv.Itoa(os.Getpid()) || len(f) != len(strings.Fields(string(want))) {
				t.Errorf("%s: %q", p, got)
			}
		case "/proc/self/status", "/proc/self/maps":
			if len(got) < len(want)/2 || strings.Count(string(got), "\n") < strings.Count(string(want), "\n")/2 {
				t.Errorf("%s: %d bytes, os.ReadFile %d", p, len(got), len(want))
			}
		default:
			if string(got) != string(want) {
				t.Errorf("%s: %q, want %q", p, got, want)
			}
		}
	}
	if _, err := Read("/proc/self/no-such-file"); err == nil {
		t.Error("a missing file read")
	}
	big := t.TempDir() + "/big"
	data := strings.Repeat("0123456789abcdef", 1000)
	if err := os.WriteFile(big, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(big); err != nil || string(got) != data {
		t.Errorf("a 16,000-byte file: %d bytes, %v", len(got), err)
	}
	empty := t.TempDir() + "/empty"
	os.WriteFile(empty, nil, 0o600)
	if got, err := Read(empty); err != nil || len(got) != 0 {
		t.Errorf("an empty file: %q, %v", got, err)
	}
}

func TestField(t *testing.T) {
	status := []byte("Name:\tcat\nUmask:\t0022\nTgid:\t42\nPPid:\t7\nUid:\t0\t0\t0\t0")
	for _, c := range []struct {
		key, want string
		ok        bool
	}{
		{"Tgid", "42", true}, {"PPid", "7", true}, {"Umask", "0022", true},
		{"Uid", "0\t0\t0\t0", true}, {"Pid", "", false}, {"Tgi", "", false}, {"", "", false},
	} {
		if got, ok := Field(status, c.key); got != c.want || ok != c.ok {
			t.Errorf("Field(%q) = %q, %v; want %q, %v", c.key, got, ok, c.want, c.ok)
		}
	}
	if _, ok := Field(nil, "Tgid"); ok {
		t.Error("Field of nothing found a key")
	}
}

func BenchmarkRead(b *testing.B) {
	for b.Loop() {
		Read("/proc/self/stat")
	}
}

func BenchmarkOSReadFile(b *testing.B) {
	for b.Loop() {
		os.ReadFile("/proc/self/stat")
	}
}
