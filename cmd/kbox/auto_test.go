package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestForkSyscall(t *testing.T) {
	cases := []struct {
		name  string
		code  []byte
		clone bool
		want  bool
	}{
		{"fork", []byte{0xB8, 57, 0, 0, 0, 0x0F, 0x05}, false, true},
		{"execve via rax", []byte{0x48, 0xC7, 0xC0, 59, 0, 0, 0, 0x0F, 0x05}, false, true},
		{"getpid", []byte{0xB8, 39, 0, 0, 0, 0x0F, 0x05}, false, false},
		{"clone via al, counted", []byte{0x31, 0xC0, 0xB0, 56, 0x0F, 0x05}, true, true},
		{"clone via al, threads", []byte{0x31, 0xC0, 0xB0, 56, 0x0F, 0x05}, false, false},
		{"number lost at a jump", []byte{0xB8, 57, 0, 0, 0, 0xEB, 0x00, 0x0F, 0x05}, false, false},
		{"number from a register", []byte{0x89, 0xF8, 0x0F, 0x05}, false, false},
	}
	for _, c := range cases {
		if _, got := forkSyscall(c.code, c.clone); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTierChoiceRefusals(t *testing.T) {
	noLib := func(string) (io.ReaderAt, error) { return nil, errors.New("none") }
	cases := []struct {
		command string
		prog    []byte
		want    string
		why     string
	}{
		{"/bin/sh", nil, "seccomp", "shell"},
		{"bash", nil, "seccomp", "shell"},
		{"/usr/bin/env", nil, "seccomp", "launcher"},
		{"/opt/x", []byte("#!/bin/sh\n"), "seccomp", "not an ELF"},
		{"/opt/y", []byte{0x7f, 'E', 'L', 'F'}, "seccomp", "not an ELF"},
	}
	for _, c := range cases {
		mode, why := tierChoice(c.command, bytes.NewReader(c.prog), noLib)
		if mode != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: %s (%s), want %s (%s)", c.command, mode, why, c.want, c.why)
		}
	}
}
