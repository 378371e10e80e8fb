package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kbox-project/kbox/sessiondir"
	"golang.org/x/sys/unix"
)

// `kbox session`: kbox mcp's live sessions for scripts. A session is one
// `kbox image --overlay DIR --serve DIR/kbox.sock` process, started
// detached by `open`; the other verbs find it through DIR/session.json
// (its pid, and the image options to start it again with) and talk to it
// on its socket (serve.go). Checkpoints, rollback and the saved image are
// package sessiondir's, as for kbox mcp (docs/agents.md).

const sessionUsage = `usage: kbox session VERB DIR ...

A session is one live kernel on IMAGE, kept up between commands: what a
run leaves running, or writes, is there for the next. DIR holds its
copy-on-write overlay (IMAGE is never written), its socket, its kbox's
log and its checkpoints.

verbs:
  open -S IMAGE DIR [image options]   boot the session's kernel, detached;
                                      DIR is made (or empty); options as
                                      kbox image's (--net, --policy, -w,
                                      --env, -b, ...)
  run DIR [-w DIR] [--env NAME=VALUE]... -- COMMAND [ARG...]
                                      run COMMAND in the session with this
                                      terminal's stdin, stdout and stderr;
                                      exit with its status
  checkpoint DIR NAME                 record the session's image as NAME
                                      (processes keep running; /tmp is not
                                      part of it)
  rollback DIR NAME                   end every process of the session and
                                      go on, on a new kernel, from NAME
  fork DIR NEWDIR                     a new session whose image starts as
                                      DIR's is now (no processes, no /tmp)
  ps DIR                              the session's processes
  close DIR [--save OUT.ext4]         end the session and remove DIR;
                                      --save first writes its image to a
                                      new file OUT.ext4

A checkpoint NAME is letters, digits and . _ + -, at most 64, not
starting with a dot. Exit status: run's is the program's (128+N if signal
N killed it); else 0, 2 for a bad command line, 125 for anything else
(no session in DIR, its kbox has ended, no checkpoint NAME, ...).
`

// Files of a session's directory beside sessiondir's.
const (
	sessionState = "session.json"
	sessionSock  = "kbox.sock"
	sessionLog   = "log"
)

// sessionStart bounds a session kernel's boot, and its end.
const sessionStart = 60 * time.Second

// sessionInfo is DIR/session.json: what starts the session's kbox again
// (rollback, fork) and which process it is.
type sessionInfo struct {
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"` // /proc/PID/stat's starttime: the pid is not another's
	Image string `json:"image"` // absolute
	// Args are the image options given to open, -S IMAGE among them,
	// relative to Cwd.
	Args []string `json:"args"`
	Cwd  string   `json:"cwd"`
}

func runSession(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, sessionUsage)
		return exitUsage
	}
	verb, rest := args[0], args[1:]
	if verb == "help" || verb == "-h" || verb == "--help" || slices0(rest, "-h", "--help") {
		fmt.Print(sessionUsage)
		return 0
	}
	var err error
	switch verb {
	case "open":
		err = sessionOpen(rest)
	case "run":
		var status int
		status, err = sessionRun(rest)
		if err == nil {
			return status
		}
	case "checkpoint":
		err = withArgs(rest, 2, "checkpoint DIR NAME", func(a []string) error { return sessionCheckpoint(a[0], a[1]) })
	case "rollback":
		err = withArgs(rest, 2, "rollback DIR NAME", func(a []string) error { return sessionRollback(a[0], a[1]) })
	case "fork":
		err = withArgs(rest, 2, "fork DIR NEWDIR", func(a []string) error { return sessionFork(a[0], a[1]) })
	case "ps":
		err = withArgs(rest, 1, "ps DIR", func(a []string) error { return sessionPs(a[0]) })
	case "close":
		err = sessionClose(rest)
	default:
		err = usagef("unknown verb %q (kbox session --help)", verb)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// slices0 says whether the first argument is one of names.
func slices0(args []string, names ...string) bool {
	if len(args) == 0 {
		return false
	}
	for _, n := range names {
		if args[0] == n {
			return true
		}
	}
	return false
}

func withArgs(args []string, n int, usage string, f func([]string) error) error {
	if len(args) != n {
		return usagef("usage: kbox session %s", usage)
	}
	for _, a := range args {
		if a == "" || strings.HasPrefix(a, "-") {
			return usagef("usage: kbox session %s (%q is not a name)", usage, a)
		}
	}
	return f(args)
}

// ---- open

func sessionOpen(args []string) error {
	dir, opts, err := splitOpenArgs(args)
	if err != nil {
		return err
	}
	o, err := ParseImageArgs(opts)
	if err != nil {
		return err
	}
	switch {
	case o.Agent.Overlay != "" || o.Agent.Serve != "":
		return usagef("kbox session open gives --overlay and --serve itself (DIR)")
	case o.Agent.Ephemeral || o.ReadOnly:
		return usagef("a session's image is always copy-on-write in DIR: give no --ephemeral, --snapshot or --read-only")
	case o.Agent.Report != "":
		return usagef("--report is for one run, not a session")
	case strings.HasPrefix(o.Image, dockerPrefix):
		return usagef("a session needs an image file: make one with kbox pull first")
	}
	o.Agent.Serve = "x"
	if err := checkServe(o); err != nil {
		return err
	}
	img, err := filepath.Abs(o.Image)
	if err != nil {
		return err
	}
	if _, err := os.Stat(img); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := sockPathFits(dir); err != nil {
		return err
	}
	made, err := emptySessionDir(dir)
	if err != nil {
		return err
	}
	unlock, err := lockSessionDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	info := &sessionInfo{Image: img, Args: opts, Cwd: cwd}
	if err := startSessionKbox(dir, info); err != nil {
		removeSessionDir(dir, made)
		return err
	}
	return nil
}

// splitOpenArgs finds DIR among open's arguments: the one word that is
// neither an option nor an option's value.
func splitOpenArgs(args []string) (string, []string, error) {
	var dir string
	var opts []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return "", nil, usagef("kbox session open runs no command: give each to kbox session run")
		case strings.HasPrefix(a, "--"):
			opts = append(opts, a)
			name, _, hasVal := strings.Cut(a[2:], "=")
			if s := findOpt("", name); s != nil && s.hasArg && !s.optionalArg && !hasVal && i+1 < len(args) {
				i++
				opts = append(opts, args[i])
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			opts = append(opts, a)
			for j := 1; j < len(a); j++ {
				s := findOpt(a[j:j+1], "")
				if s == nil || !s.hasArg {
					continue
				}
				if j == len(a)-1 && i+1 < len(args) {
					i++
					opts = append(opts, args[i])
				}
				break
			}
		case dir == "":
			dir = a
		default:
			return "", nil, usagef("unexpected argument %q: kbox session open -S IMAGE DIR [image options]", a)
		}
	}
	if dir == "" {
		return "", nil, usagef("usage: kbox session open -S IMAGE DIR [image options]")
	}
	return dir, opts, nil
}

// sockPathFits refuses a DIR whose socket's path a unix socket cannot
// have (108 bytes with its NUL).
func sockPathFits(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if p := filepath.Join(abs, sessionSock); len(p) > 107 {
		return fmt.Errorf("%s: the path is too long for the session's socket (%s, %d bytes, at most 107): use a shorter DIR", dir, p, len(p))
	}
	return nil
}

// emptySessionDir makes dir, or checks that it is an empty directory;
// made says it made it.
func emptySessionDir(dir string) (made bool, err error) {
	err = os.Mkdir(dir, 0o700)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return false, err
	}
	if _, ierr := readSessionInfo(dir); ierr == nil {
		if _, live := sessionAlive(dir); live == nil {
			return false, fmt.Errorf("%s holds a live session: close it first (kbox session close %s)", dir, dir)
		}
		return false, fmt.Errorf("%s holds a session whose kbox has ended: close it first (kbox session close %s)", dir, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	if len(ents) > 0 {
		return false, fmt.Errorf("%s is not empty and holds no session: give a new or empty directory", dir)
	}
	return false, nil
}

// startSessionKbox starts the session's kbox on dir, detached (its own
// session, stdio to DIR/log), records it in DIR/session.json and waits
// until its socket answers.
func startSessionKbox(dir string, info *sessionInfo) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sock := filepath.Join(abs, sessionSock)
	os.Remove(sock) // a killed kbox's
	args := append([]string{"image", "--syscall-mode=seccomp"}, info.Args...)
	args = append(args, "--overlay", abs, "--serve", sock)
	logf, err := os.OpenFile(filepath.Join(abs, sessionLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(exe, args...)
	cmd.Dir = info.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.Env = append(os.Environ(), "KBOX_DEBUG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the session's kbox: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	info.Pid = cmd.Process.Pid
	info.Start, _ = procStart(info.Pid)
	if err := writeSessionInfo(abs, info); err != nil {
		cmd.Process.Kill()
		<-exited
		return err
	}
	deadline := time.Now().Add(sessionStart)
	for {
		// The socket answers once the kernel is up and the spawner
		// serves: a ps before then waits for its accept.
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, err := sessiondir.Call(ctx, sock, &ServeRequest{Op: "ps"}, nil, nil)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the session's kbox did not start: %s", lastLogLine(abs))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("the session's kbox did not start in %v: %s", sessionStart, lastLogLine(abs))
		}
	}
}

func lastLogLine(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, sessionLog))
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "it said nothing (DIR/log)"
	}
	return s
}

func writeSessionInfo(dir string, info *sessionInfo) error {
	b, _ := json.MarshalIndent(info, "", "  ")
	tmp := filepath.Join(dir, sessionState+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, sessionState))
}

// readSessionInfo reads DIR/session.json: an error that says what DIR is
// when it is no session.
func readSessionInfo(dir string) (*sessionInfo, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("no session in %s: %w", dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("no session in %s: not a directory", dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, sessionState))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no session in %s (no %s: open one with kbox session open)", dir, sessionState)
	}
	if err != nil {
		return nil, err
	}
	var info sessionInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Pid <= 0 || info.Image == "" {
		return nil, fmt.Errorf("%s: %s is not a session's (%v)", dir, sessionState, err)
	}
	return &info, nil
}

// lockSessionDir takes DIR's lock: one verb at a time changes a session
// (run and ps take none).
func lockSessionDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: lock: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// ---- the session's process

// procStart is /proc/PID/stat's starttime, and whether the process is
// running (not a zombie).
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state), f[19] field 22 (starttime)
	if len(f) < 20 {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, err == nil && f[0] != "Z" && f[0] != "X"
}

// running says whether the session's kbox is still the process info names.
func (info *sessionInfo) running() bool {
	start, ok := procStart(info.Pid)
	return ok && start == info.Start
}

// errSessionEnded says a session's kbox has ended.
func errSessionEnded(dir string, info *sessionInfo) error {
	return fmt.Errorf("the session in %s has no live kernel: its kbox (pid %d) has ended, and its processes with it; close it (kbox session close %s) or roll back to a checkpoint", dir, info.Pid, dir)
}

// sessionAlive returns DIR's session when its kbox runs.
func sessionAlive(dir string) (*sessionInfo, error) {
	info, err := readSessionInfo(dir)
	if err != nil {
		return nil, err
	}
	if !info.running() {
		return nil, errSessionEnded(dir, info)
	}
	return info, nil
}

// call sends req to DIR's session and decodes its answer; a kbox that
// has gone is said so.
func sessionCall(ctx context.Context, dir string, info *sessionInfo, req *ServeRequest, fds []int, onStart func(int)) (*ServeAnswer, error) {
	body, err := sessiondir.Call(ctx, filepath.Join(dir, sessionSock), req, fds, onStart)
	var ce *sessiondir.ConnError
	if errors.As(err, &ce) {
		time.Sleep(10 * time.Millisecond) // a kbox that just died is not reaped yet
		if !info.running() {
			return nil, errSessionEnded(dir, info)
		}
		return nil, fmt.Errorf("the session in %s does not answer: %v", dir, ce.Err)
	}
	if err != nil {
		return nil, err
	}
	var a ServeAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("the session's kernel answered badly: %v", err)
	}
	return &a, nil
}

// stopSessionKbox ends the session's kbox: asked to close (its processes
// end, its overlay and map are saved), else SIGTERM, then SIGKILL; it
// returns once the process has gone.
func stopSessionKbox(dir string, info *sessionInfo) {
	if !info.running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := sessionCall(ctx, dir, info, &ServeRequest{Op: "close"}, nil, nil)
	cancel()
	if err != nil && info.running() {
		unix.Kill(info.Pid, unix.SIGTERM)
	}
	deadline := time.Now().Add(sessionStart)
	for info.running() {
		if time.Now().After(deadline) {
			unix.Kill(info.Pid, unix.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// removeSessionDir removes what a session keeps in dir, and dir when it
// made it or it is then empty.
func removeSessionDir(dir string, made bool) {
	for _, f := range []string{sessiondir.Overlay, sessiondir.Dirty, sessiondir.Dirty + ".tmp", sessiondir.Busy,
		sessiondir.Overlay + ".rollback", sessiondir.Dirty + ".rollback", sessionSock, sessionLog, sessionState, sessionState + ".tmp"} {
		os.Remove(filepath.Join(dir, f))
	}
	os.RemoveAll(filepath.Join(dir, sessiondir.Checkpoints))
	if made {
		os.RemoveAll(dir)
	} else {
		os.Remove(dir)
	}
}

// ---- run, ps

func sessionRun(args []string) (int, error) {
	var dir, wd string
	var env, argv []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func() (string, error) {
			if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
				return v, nil
			}
			if i+1 >= len(args) {
				return "", usagef("option %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch {
		case a == "--":
			argv = args[i+1:]
			i = len(args)
		case a == "-w" || a == "--workdir" || strings.HasPrefix(a, "--workdir="):
			v, err := val()
			if err != nil {
				return 0, err
			}
			if !strings.HasPrefix(v, "/") {
				return 0, usagef("-w %q: want an absolute path in the image", v)
			}
			wd = v
		case a == "--env" || strings.HasPrefix(a, "--env="):
			v, err := val()
			if err != nil {
				return 0, err
			}
			if name, _, ok := strings.Cut(v, "="); !ok || name == "" || strings.ContainsRune(v, 0) {
				return 0, usagef("bad --env %q: want NAME=VALUE", v)
			}
			env = append(env, v)
		case strings.HasPrefix(a, "-"):
			return 0, usagef("unknown option %s of kbox session run", a)
		case dir == "":
			dir = a
		default:
			argv = args[i:] // the command, without --
			i = len(args)
		}
	}
	if dir == "" || len(argv) == 0 || argv[0] == "" {
		return 0, usagef("usage: kbox session run DIR [-w DIR] [--env NAME=VALUE]... -- COMMAND [ARG...]")
	}
	info, err := sessionAlive(dir)
	if err != nil {
		return 0, err
	}
	// A signal kbox gets goes to the program, which ends as it decides;
	// kbox ending anyway (closing the connection) kills it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT)
	defer signal.Stop(sigs)
	pids := make(chan int, 1)
	go func() {
		pid := <-pids
		for s := range sigs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			sessionCall(ctx, dir, info, &ServeRequest{Op: "signal", Pid: pid, Signal: int(s.(syscall.Signal))}, nil, nil)
			cancel()
		}
	}()
	req := &ServeRequest{Op: "run", Argv: argv, Env: env, Workdir: wd}
	a, err := sessionCall(context.Background(), dir, info, req, []int{0, 1, 2}, func(pid int) { pids <- pid })
	if err != nil {
		return 0, err
	}
	if a.Error != "" {
		return 0, errors.New(a.Error)
	}
	return a.Status, nil
}

func sessionPs(dir string) error {
	info, err := sessionAlive(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := sessionCall(ctx, dir, info, &ServeRequest{Op: "ps"}, nil, nil)
	if err != nil {
		return err
	}
	if a.Error != "" {
		return errors.New(a.Error)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "PID\tPPID\tCOMM\tARGS")
	for _, p := range a.Procs {
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", p.Pid, p.PPid, p.Comm, p.Args)
	}
	return w.Flush()
}

// ---- checkpoint, rollback, fork, close

func sessionCheckpoint(dir, name string) error {
	if err := sessiondir.CheckName(name); err != nil {
		return usagef("%v", err)
	}
	unlock, err := lockSessionDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	info, err := sessionAlive(dir)
	if err != nil {
		return err
	}
	cp, err := sessiondir.NewCheckpoint(dir, name)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("checkpoint %q exists in %s", name, dir)
	}
	if err != nil {
		return err
	}
	if cp, err = filepath.Abs(cp); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionStart)
	defer cancel()
	a, err := sessionCall(ctx, dir, info, &ServeRequest{Op: "checkpoint", Dir: cp}, nil, nil)
	if err == nil && a.Error != "" {
		err = errors.New(a.Error)
	}
	if err != nil {
		os.RemoveAll(cp)
	}
	return err
}

// sessionRollback works on a session whose kbox was killed, too: the
// checkpoint is whole.
func sessionRollback(dir, name string) error {
	if err := sessiondir.CheckName(name); err != nil {
		return usagef("%v", err)
	}
	unlock, err := lockSessionDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	info, err := readSessionInfo(dir)
	if err != nil {
		return err
	}
	if !sessiondir.HasCheckpoint(dir, name) {
		return fmt.Errorf("no checkpoint %q in %s", name, dir)
	}
	stopSessionKbox(dir, info)
	if err := sessiondir.Restore(dir, name); err != nil {
		return fmt.Errorf("rollback: %v; the session has no kernel now: close it", err)
	}
	if err := startSessionKbox(dir, info); err != nil {
		return fmt.Errorf("rollback: %v; the session has no kernel now: close it", err)
	}
	return nil
}

func sessionFork(dir, newDir string) error {
	if _, err := os.Lstat(newDir); err == nil {
		return fmt.Errorf("%s exists: a fork makes a new directory", newDir)
	}
	if err := sockPathFits(newDir); err != nil {
		return err
	}
	abs, err := filepath.Abs(newDir)
	if err != nil {
		return err
	}
	unlock, err := lockSessionDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	info, err := sessionAlive(dir)
	if err != nil {
		return err
	}
	// The session's kbox copies its overlay, frozen, into the new
	// directory, which it makes.
	ctx, cancel := context.WithTimeout(context.Background(), sessionStart)
	a, err := sessionCall(ctx, dir, info, &ServeRequest{Op: "checkpoint", Dir: abs}, nil, nil)
	cancel()
	if err == nil && a.Error != "" {
		err = errors.New(a.Error)
	}
	if err != nil {
		if !errors.Is(err, os.ErrExist) && !strings.Contains(err.Error(), "file exists") {
			os.RemoveAll(abs)
		}
		return fmt.Errorf("fork: %v", err)
	}
	fork := &sessionInfo{Image: info.Image, Args: info.Args, Cwd: info.Cwd}
	if err := startSessionKbox(abs, fork); err != nil {
		removeSessionDir(abs, true)
		return fmt.Errorf("fork: %v", err)
	}
	return nil
}

func sessionClose(args []string) error {
	var dir, save string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--save" && i+1 < len(args):
			i++
			save = args[i]
		case strings.HasPrefix(a, "--save="):
			save = strings.TrimPrefix(a, "--save=")
		case strings.HasPrefix(a, "-") || dir != "":
			return usagef("usage: kbox session close DIR [--save OUT.ext4]")
		default:
			dir = a
		}
	}
	if dir == "" || (save == "" && slices0(args, "--save")) {
		return usagef("usage: kbox session close DIR [--save OUT.ext4]")
	}
	if save != "" {
		if _, err := os.Lstat(save); err == nil {
			return fmt.Errorf("--save %s: it exists: give a new file", save)
		}
	}
	unlock, err := lockSessionDir(dir)
	if err != nil {
		if _, ierr := readSessionInfo(dir); ierr != nil {
			return ierr
		}
		return err
	}
	defer unlock()
	info, err := readSessionInfo(dir)
	if err != nil {
		return err
	}
	stopSessionKbox(dir, info)
	if save != "" {
		if sessiondir.Broken(dir) {
			return fmt.Errorf("--save: the session's kbox was killed, so its image is incomplete: roll back to a checkpoint first, or close without --save")
		}
		if err := saveSessionImage(dir, info, save); err != nil {
			return fmt.Errorf("--save: %v; the session's directory is kept", err)
		}
	}
	removeSessionDir(dir, false)
	return nil
}

// saveSessionImage writes the session's image (its kbox has ended) to
// out, whole or not at all.
func saveSessionImage(dir string, info *sessionInfo, out string) error {
	base, err := os.Open(info.Image)
	if err != nil {
		return err
	}
	defer base.Close()
	if err := unix.Flock(int(base.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return fmt.Errorf("%s is open read-write by a kbox: %v", info.Image, err)
	}
	fi, err := base.Stat()
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".kbox-tmp")
	os.Remove(tmp)
	err = sessiondir.SaveImage(base, fi.Size(), dir, tmp)
	if err == nil {
		err = sessiondir.Publish(tmp, out)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
