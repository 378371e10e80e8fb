package main

import (
	"fmt"
	"os"
	"path"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/policy"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

// filePolicy applies a policy's path rules to kbox file's operations
// (kbox mcp's session file tools) as the engine applies them to a guest's
// calls: a hidden path is ENOENT, and left out of listings; creating or
// writing a read-only one is EROFS. A path's class is the strictest of
// its lexical path, its path as LKL resolves it and, for another name of
// a hidden file, its inode (dispatch.Policy.ImagePathClass).
type filePolicy struct {
	c     *dispatch.Policy
	kproc int
}

// newFilePolicy readies c for the image root has mounted; nil (no
// policy, or no path rules) checks nothing.
func newFilePolicy(c *dispatch.Policy, root *rootfs.Root) *filePolicy {
	if c == nil || !c.P.HasPaths() {
		return nil
	}
	kproc, ok := root.KernelProc()
	if !ok {
		kproc = -1
	}
	if _, cut := c.ScanHidden(); cut {
		fmt.Fprintf(os.Stderr, "kbox: warning: policy: the walk for other names of hidden files stopped early\n")
	}
	return &filePolicy{c: c, kproc: kproc}
}

func (fp *filePolicy) class(p string) policy.Class {
	c, _ := fp.c.ImagePathClass(fp.kproc, p)
	return c
}

// hidden says that p is hidden.
func (fp *filePolicy) hidden(p string) bool {
	return fp != nil && fp.class(p) == policy.Hidden
}

// check refuses r when the policy forbids it: ENOENT for a hidden path,
// EROFS for writing a read-only one (and for the directories mkdirs
// would create).
func (fp *filePolicy) check(r *FileRequest) error {
	if fp == nil {
		return nil
	}
	p := path.Clean(r.Path)
	switch c := fp.class(p); {
	case c == policy.Hidden:
		return unix.ENOENT
	case c == policy.ReadOnly && r.Op == "write":
		return unix.EROFS
	}
	if r.Op != "write" || !r.Mkdirs {
		return nil
	}
	// The directories mkdirs would create.
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, err := lkl.Stat(d, false); err == nil {
			continue
		}
		switch fp.class(d) {
		case policy.Hidden:
			return unix.ENOENT
		case policy.ReadOnly:
			return unix.EROFS
		}
	}
	return nil
}
