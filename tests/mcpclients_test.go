//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MCP clients kbox did not write, from npm at the versions pinned in
// testdata/mcpclients (package-lock.json): the official TypeScript SDK's
// client drives one agent's session (client.mjs), and the MCP Inspector's
// command line lists the tools. Without node and npm the test skips
// loudly; npm ci needs the npm registry.
func TestMCPClientsFromNPM(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP (needs %s): install Node.js and npm", tool)
		}
	}
	bin, img := kboxBin(t), copyImage(t, imagePath(t))
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "client.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "mcpclients", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}

	ts := exec.Command("node", "client.mjs", bin, img)
	ts.Dir = dir
	if out, err := ts.CombinedOutput(); err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Errorf("the TypeScript SDK's client: %v\n%s", err, out)
	}

	insp := exec.Command(filepath.Join(dir, "node_modules", ".bin", "mcp-inspector"), "--cli", bin, "mcp", "--image", img, "--method", "tools/list")
	insp.Dir = dir
	out, err := insp.CombinedOutput()
	for _, tool := range []string{"run", "session_open", "session_fork", "session_rollback", "process_output", "read_file"} {
		if err != nil || !strings.Contains(string(out), `"name": "`+tool+`"`) {
			t.Errorf("the MCP Inspector's tools/list lacks %s: %v\n%.2000s", tool, err, out)
		}
	}
}
