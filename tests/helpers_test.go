//go:build lkl

package tests

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Set-up shared by the tests of kbox import and of the MCP server's
// audit log.

// importOut makes dir/out, the directory kbox import writes its image
// out.ext4 into, and returns both paths: a failed import leaves the
// directory empty.
func importOut(dir string) (outDir, out string) {
	outDir = filepath.Join(dir, "out")
	os.Mkdir(outDir, 0o755)
	return outDir, filepath.Join(outDir, "out.ext4")
}

// importCase is a run of kbox import ARGS -o OUT: its exit status, and
// the image's /marker when it succeeds or a part of its stderr when not.
type importCase struct {
	name   string
	args   []string
	status int
	want   string // /marker, or the error
}

// runImportCases runs each case as a subtest: a failed import says
// c.want and leaves outDir empty, a successful one writes out with
// c.want in /marker (out is removed after it).
func runImportCases(t *testing.T, outDir, out string, cases []importCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{"import"}, c.args...), "-o", out)
			so, se, status := runKbox(t, args...)
			if status != c.status {
				t.Fatalf("kbox %q: status %d, want %d\nstdout %q\nstderr %q", args, status, c.status, so, se)
			}
			if c.status != 0 {
				if !strings.Contains(se, c.want) {
					t.Errorf("stderr %q lacks %q", se, c.want)
				}
				if left, _ := os.ReadDir(outDir); len(left) != 0 {
					t.Errorf("files left in the output's directory: %v", left)
				}
				return
			}
			if got, _ := debugfsCat(t, out, "/marker"); got != c.want+"\n" {
				t.Errorf("/marker %q, want %q", got, c.want)
			}
			os.Remove(out)
		})
	}
}

// auditRecord is a record of an audit log (a JSON line), with the line.
type auditRecord struct {
	Type     string         `json:"type"`
	Settings string         `json:"settings_sha256"`
	Data     map[string]any `json:"data"`
	line     string
}

// readAuditLog reads the records of the audit log at path, in order.
func readAuditLog(t *testing.T, path string) []auditRecord {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []auditRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var rec auditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		rec.line = sc.Text()
		recs = append(recs, rec)
	}
	return recs
}
