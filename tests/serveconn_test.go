//go:build lkl

package tests

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kbox-project/kbox/sessiondir"
)

type serveFileAnswer struct {
	raw   []byte // the frame's raw part: a read's bytes
	Error string `json:"error"`
	File  *struct {
		Error string `json:"error"`
		Data  string `json:"data"`
		Size  int64  `json:"size"`
		Stat  *struct {
			Size int64 `json:"size"`
		} `json:"stat"`
	} `json:"file"`
}

// TestServeKeptConnection: kbox image --serve answers one request after
// another on one connection (the connection the MCP server keeps for a
// session's file calls), an unknown op or a bad frame gets an error, and
// the session's close shuts a connection that waits for its next request.
func TestServeKeptConnection(t *testing.T) {
	img := imagePath(t)
	sock := filepath.Join(t.TempDir(), "s.sock")
	cmd := exec.Command(kboxBin(t), "image", "-S", img, "--ephemeral", "--serve", sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Its stdout is read before Wait, which closes it.
	line, rerr := bufio.NewReader(out).ReadString('\n')
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-waited
	}()
	if rerr != nil || line != "{\"ready\":true}\n" {
		t.Fatalf("kbox --serve did not start: %q %v", line, rerr)
	}
	ctx := context.Background()
	kept, err := sessiondir.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	ask := func(req map[string]any) serveFileAnswer {
		t.Helper()
		body, raw, err := kept.Call(ctx, req)
		if err != nil {
			t.Fatalf("%v on the kept connection: %v", req, err)
		}
		var a serveFileAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("answer %s: %v", body, err)
		}
		a.raw = raw
		return a
	}
	want, err := exec.Command("debugfs", "-R", "cat /etc/hostname", img).Output()
	if err != nil {
		t.Fatalf("debugfs: %v", err)
	}
	for i := 0; i < 3; i++ {
		a := ask(map[string]any{"op": "read", "file": map[string]any{"op": "read", "path": "/etc/hostname"}})
		if a.File == nil || a.File.Error != "" {
			t.Fatalf("read %d: %+v", i, a)
		}
		if string(a.raw) != string(want) || a.File.Data != "" {
			t.Errorf("read %d: %q (data %q), want %q", i, a.raw, a.File.Data, want)
		}
		a = ask(map[string]any{"op": "stat", "file": map[string]any{"op": "stat", "path": "/etc/hostname"}})
		if a.File == nil || a.File.Stat == nil || a.File.Stat.Size != int64(len(want)) {
			t.Errorf("stat %d: %+v", i, a)
		}
	}
	if a := ask(map[string]any{"op": "frobnicate"}); !strings.Contains(a.Error, "unknown op") {
		t.Errorf("an unknown op: %+v", a)
	}
	if a := ask(map[string]any{"op": "ps"}); a.Error != "" {
		t.Errorf("ps after an unknown op: %+v", a)
	}

	// A frame over the limit: an error, and the connection's end.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(binary.LittleEndian.AppendUint64(nil, 0xffffffff))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var head [sessiondir.HeadLen]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		t.Fatalf("no answer to a frame over the limit: %v", err)
	}
	body, _, _ := sessiondir.ReadBody(c, head, 1<<20)
	if !strings.Contains(string(body), "above the limit") {
		t.Errorf("a frame over the limit: %s", body)
	}
	if n, err := c.Read(head[:]); n != 0 || err == nil {
		t.Errorf("the connection goes on after a bad frame: %d %v", n, err)
	}
	c.Close()

	// The session's close, with the kept connection idle: kbox ends, and
	// the kept connection is shut.
	t0 := time.Now()
	if _, _, err := sessiondir.Call(ctx, sock, map[string]any{"op": "close"}, nil, nil); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-waited:
		waited <- err
		if err != nil {
			t.Errorf("kbox --serve after close: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("kbox --serve still runs 60 s after close")
	}
	t.Logf("kbox --serve ended %v after close, with a kept connection idle", time.Since(t0).Round(time.Millisecond))
	var ce *sessiondir.ConnError
	if _, _, err := kept.Call(ctx, map[string]any{"op": "ps"}); !errors.As(err, &ce) || !kept.Broken() {
		t.Errorf("a call on the kept connection after the session's end: %v", err)
	}
}
