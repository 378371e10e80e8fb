package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
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
  open -S IMAGE DIR [image options]     boot the session's kernel, detached;
                                        DIR is made (or empty); options as
                                        kbox image's (--net, --policy, -w,
                                        --env, -b, ...)
  run DIR [-w D] [--env K=V] -- CMD...  run CMD in the session with this
                                        terminal's stdin, stdout and
                                        stderr, in D, with K=V; exit with
                                        its status
  checkpoint DIR NAME                   record the session's image as NAME
                                        (processes keep running; /tmp is
                                        not part of it)
  rollback DIR NAME                     end every process of the session
                                        and go on, on a new kernel, from
                                        NAME (also after its kbox was
                                        killed)
  fork DIR NEWDIR                       a new session whose image starts as
                                        DIR's is now (no processes, no /tmp)
  ps DIR                                the session's processes
  close DIR [--save OUT.ext4]           end the session and remove DIR;
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
	if verb == "help" || verb == "-h" || verb == "--help" || len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
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
	phases.print() // KBOX_TRACE_STARTUP: where the verb's time went
	if err != nil {
		return fail(err)
	}
	return 0
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
	if o.Help {
		fmt.Print(sessionUsage)
		return nil
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
	made := os.Mkdir(dir, 0o700) == nil
	unlock, err := lockSessionDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := emptySessionDir(dir); err != nil { // under the lock: two opens do not both start
		if made {
			os.Remove(dir)
		}
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	info := &sessionInfo{Image: img, Args: opts, Cwd: cwd}
	phases.mark("checks")
	if err := startSessionKbox(dir, info); err != nil {
		removeSessionDir(dir, made)
		return err
	}
	phases.mark("boot")
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

// emptySessionDir checks that dir is an empty directory, and says what
// it holds when it is not.
func emptySessionDir(dir string) error {
	if _, ierr := readSessionInfo(dir); ierr == nil {
		if _, live := sessionAlive(dir); live == nil {
			return fmt.Errorf("%s holds a live session: close it first (kbox session close %s)", dir, dir)
		}
		return fmt.Errorf("%s holds a session whose kbox has ended: close it first (kbox session close %s)", dir, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty and holds no session: give a new or empty directory", dir)
	}
	return nil
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

// lockedSession takes DIR's lock and reads its session: one whose kbox
// runs when live, else whatever DIR/session.json names. The caller
// calls unlock when err is nil.
func lockedSession(dir string, live bool) (info *sessionInfo, unlock func(), err error) {
	if unlock, err = lockSessionDir(dir); err != nil {
		return nil, nil, err
	}
	read := readSessionInfo
	if live {
		read = sessionAlive
	}
	if info, err = read(dir); err != nil {
		unlock()
		return nil, nil, err
	}
	return info, unlock, nil
}

// lockedCheckpoint is lockedSession for a verb that names a checkpoint:
// a bad name is a usage error, found before anything else.
func lockedCheckpoint(dir, name string, live bool) (*sessionInfo, func(), error) {
	if err := sessiondir.CheckName(name); err != nil {
		return nil, nil, usagef("%v", err)
	}
	return lockedSession(dir, live)
}

func sessionCheckpoint(dir, name string) error {
	info, unlock, err := lockedCheckpoint(dir, name, true)
	if err != nil {
		return err
	}
	defer unlock()
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
	phases.mark("attach")
	ctx, cancel := context.WithTimeout(context.Background(), sessionStart)
	defer cancel()
	a, err := sessionCall(ctx, dir, info, &ServeRequest{Op: "checkpoint", Dir: cp}, nil, nil)
	if err == nil && a.Error != "" {
		err = errors.New(a.Error)
	}
	phases.mark("checkpoint")
	if err != nil {
		os.RemoveAll(cp)
	}
	return err
}

// sessionRollback works on a session whose kbox was killed, too: the
// checkpoint is whole.
func sessionRollback(dir, name string) error {
	info, unlock, err := lockedCheckpoint(dir, name, false)
	if err != nil {
		return err
	}
	defer unlock()
	if !sessiondir.HasCheckpoint(dir, name) {
		return fmt.Errorf("no checkpoint %q in %s", name, dir)
	}
	phases.mark("attach")
	stopSessionKbox(dir, info, true)
	phases.mark("end-kernel")
	if err := sessiondir.Restore(dir, name); err != nil {
		return fmt.Errorf("rollback: %v; the session has no kernel now: close it", err)
	}
	phases.mark("restore")
	if err := startSessionKbox(dir, info); err != nil {
		return fmt.Errorf("rollback: %v; the session has no kernel now: close it", err)
	}
	phases.mark("boot")
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
	info, unlock, err := lockedSession(dir, true)
	if err != nil {
		return err
	}
	defer unlock()
	phases.mark("attach")
	// The session's kbox seals its top layer, frozen, and writes the
	// chain into the new directory, which it makes; the new directory
	// then links the sealed layers.
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
	if err := sessiondir.LinkLayers(dir, abs); err != nil {
		removeSessionDir(abs, true)
		return fmt.Errorf("fork: %v", err)
	}
	phases.mark("seal")
	fork := &sessionInfo{Image: info.Image, Args: info.Args, Cwd: info.Cwd}
	if err := startSessionKbox(abs, fork); err != nil {
		removeSessionDir(abs, true)
		return fmt.Errorf("fork: %v", err)
	}
	phases.mark("boot")
	return nil
}

func sessionClose(args []string) error {
	var dir, save string
	saving := false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--save" && i+1 < len(args):
			i++
			save, saving = args[i], true
		case strings.HasPrefix(a, "--save="):
			save, saving = strings.TrimPrefix(a, "--save="), true
		case strings.HasPrefix(a, "-") || dir != "":
			return usagef("usage: kbox session close DIR [--save OUT.ext4]")
		default:
			dir = a
		}
	}
	if dir == "" || saving && save == "" {
		return usagef("usage: kbox session close DIR [--save OUT.ext4]")
	}
	if save != "" {
		if _, err := os.Lstat(save); err == nil {
			return fmt.Errorf("--save %s: it exists: give a new file", save)
		}
	}
	info, unlock, err := lockedSession(dir, false)
	if err != nil {
		// DIR that is no session's is said so rather than that it
		// cannot be locked.
		if _, ierr := readSessionInfo(dir); ierr != nil {
			return ierr
		}
		return err
	}
	defer unlock()
	phases.mark("attach")
	// Without --save nothing of the overlay is kept: the kernel is left
	// to its exit.
	stopSessionKbox(dir, info, save == "")
	phases.mark("end-kernel")
	if save != "" {
		if sessiondir.Broken(dir) {
			return fmt.Errorf("--save: the session's kbox was killed, so its image is incomplete: roll back to a checkpoint first, or close without --save")
		}
		if err := saveSessionImage(dir, info, save); err != nil {
			return fmt.Errorf("--save: %v; the session's directory is kept", err)
		}
		phases.mark("save")
	}
	removeSessionDir(dir, false)
	phases.mark("remove")
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
