package tests

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// maxLines is the house's limit on a source file's length.
const maxLines = 800

// sourceExt are the files the limit applies to.
var sourceExt = map[string]bool{".go": true, ".c": true, ".h": true, ".sh": true, ".py": true, ".js": true, ".mjs": true, ".ts": true}

// TestSourceShape checks what the house's rules say of every source file
// that the repository tracks: none is over maxLines lines but generated
// ones (a "Code generated ... DO NOT EDIT." line near the top), and cgo
// (import "C") and unsafe stay in files named for them (a name holding
// "cgo" or "unsafe"; tests may use unsafe for layouts).
func TestSourceShape(t *testing.T) {
	root := repoRoot()
	files := trackedFiles(t, root)
	checked := 0
	for _, f := range files {
		ext := filepath.Ext(f)
		if !sourceExt[ext] {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree
			}
			t.Fatal(err)
		}
		checked++
		if n := bytes.Count(data, []byte("\n")); n > maxLines && !generated(data) {
			t.Errorf("%s: %d lines, over %d", f, n, maxLines)
		}
		if ext != ".go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		base := filepath.Base(f)
		if strings.Contains(base, "cgo") || strings.Contains(base, "unsafe") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, data, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "C" || p == "unsafe" {
				t.Errorf("%s imports %q: cgo and unsafe go in files named for them", f, p)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d source files found under %s", checked, root)
	}
}

// generated reports whether a file says near its top that a program
// wrote it.
func generated(data []byte) bool {
	head := data[:min(len(data), 1024)]
	return bytes.Contains(head, []byte("Code generated")) && bytes.Contains(head, []byte("DO NOT EDIT"))
}

// trackedFiles lists the repository's files, relative to root: git's
// list where this is a clone, else a walk that leaves out what is built
// or installed (.git, node_modules, .lkl, .musl-include).
func trackedFiles(t *testing.T, root string) []string {
	if out, err := exec.Command("git", "-C", root, "ls-files").Output(); err == nil && len(out) > 0 {
		return strings.Fields(string(out))
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".lkl", ".musl-include":
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
