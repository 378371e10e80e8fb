package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/seccomp"
	"golang.org/x/sys/unix"
)

// A live session (Config.Session): the guest start-up becomes a spawner
// (spawner.c) instead of one program, and Spawns starts programs through
// it, each a new guest process of the same kernel and engine, for as long
// as the session lasts.

// spawnMagic is the first argument of the getppid call by which a
// spawned child asks for its standard fds (spawner.h: KBOX_SPAWN_MAGIC).
const spawnMagic = 0x6b626f7873706e21

// stdioDone is getppid's answer to a child whose fds are installed
// (spawner.c: STDIO_DONE).
const stdioDone = 0x4b42

// maxSpawnRequest bounds a request's strings (spawner.c: MAX_REQ).
const maxSpawnRequest = 8 << 20

// ErrSessionClosed is Start's error once the session has ended.
var ErrSessionClosed = errors.New("the session has ended")

// Spawns starts programs in a live session.
type Spawns struct {
	ready   chan struct{} // closed once the spawner serves (attach)
	mu      sync.Mutex
	sock    *os.File
	spawner int
	byID    map[uint64]*Spawn
	byPid   map[int]*Spawn // started, not yet reaped
	ended   bool
}

// Spawn is one program started in a session.
type Spawn struct {
	id      uint64
	stdio   []*os.File // until the child takes them (takeStdio)
	started chan struct{}
	done    chan struct{}
	pid     int
	err     error
	status  unix.WaitStatus
}

// NewSpawns returns the spawns of a session that has not started yet.
func NewSpawns() *Spawns {
	return &Spawns{ready: make(chan struct{}), byID: map[uint64]*Spawn{}, byPid: map[int]*Spawn{}}
}

// Ready is closed once programs can be started.
func (s *Spawns) Ready() <-chan struct{} { return s.ready }

// attach gives s the socket to the spawner and reads its answers until
// it hangs up.
func (s *Spawns) attach(sock *os.File, spawner int) {
	s.mu.Lock()
	s.sock, s.spawner = sock, spawner
	s.mu.Unlock()
	close(s.ready)
	go s.read(sock)
}

func (s *Spawns) read(sock io.Reader) {
	var m [24]byte
	for {
		if _, err := io.ReadFull(sock, m[:]); err != nil {
			break
		}
		id := binary.NativeEndian.Uint64(m[0:])
		pid := int(int32(binary.NativeEndian.Uint32(m[8:])))
		val := int32(binary.NativeEndian.Uint32(m[12:]))
		s.mu.Lock()
		sp := s.byID[id]
		s.mu.Unlock()
		if sp == nil {
			continue
		}
		switch m[16] {
		case 'S':
			sp.pid = pid
			s.mu.Lock()
			s.byPid[pid] = sp
			s.mu.Unlock()
			close(sp.started)
		case 'E':
			sp.err = fmt.Errorf("start: %w", unix.Errno(val))
			s.finish(sp)
			close(sp.started)
			close(sp.done)
		case 'X':
			sp.status = unix.WaitStatus(val)
			s.finish(sp)
			close(sp.done)
		}
	}
	// The spawner is gone: every run still waiting ends.
	s.mu.Lock()
	s.ended = true
	left := s.byID
	s.byID, s.byPid = map[uint64]*Spawn{}, map[int]*Spawn{}
	s.mu.Unlock()
	for _, sp := range left {
		sp.closeStdio()
		sp.err = ErrSessionClosed
		select {
		case <-sp.started:
		default:
			close(sp.started)
		}
		close(sp.done)
	}
}

func (s *Spawns) finish(sp *Spawn) {
	s.mu.Lock()
	delete(s.byID, sp.id)
	if s.byPid[sp.pid] == sp {
		delete(s.byPid, sp.pid)
	}
	f := sp.stdio
	sp.stdio = nil
	s.mu.Unlock()
	for _, x := range f {
		x.Close()
	}
}

// Start starts the program at guest path with argv and env, in guest
// directory cwd, with stdio as its fds 0, 1 and 2 (kbox keeps no copy
// once the program has them: the caller may close its own).
func (s *Spawns) Start(path, cwd string, argv, env []string, stdio [3]*os.File) (*Spawn, error) {
	if len(argv) == 0 {
		return nil, errors.New("no program")
	}
	strs := []string{path, cwd}
	strs = append(append(strs, argv...), env...)
	size := 0
	for _, x := range strs {
		if strings.IndexByte(x, 0) >= 0 {
			return nil, fmt.Errorf("%q has a NUL byte", x)
		}
		size += len(x) + 1
	}
	if size > maxSpawnRequest {
		return nil, fmt.Errorf("the arguments and environment are %d bytes, above the limit of %d", size, maxSpawnRequest)
	}
	sp := &Spawn{started: make(chan struct{}), done: make(chan struct{})}
	for _, f := range stdio {
		d, err := dupFile(f)
		if err != nil {
			sp.closeStdio()
			return nil, err
		}
		sp.stdio = append(sp.stdio, d)
	}
	buf := make([]byte, 24, 24+size)
	binary.NativeEndian.PutUint32(buf[0:], uint32(size))
	binary.NativeEndian.PutUint32(buf[4:], uint32(len(argv)))
	binary.NativeEndian.PutUint32(buf[8:], uint32(len(env)))
	for _, x := range strs {
		buf = append(append(buf, x...), 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.sock == nil {
		sp.closeStdio()
		return nil, ErrSessionClosed
	}
	for sp.id == 0 || s.byID[sp.id] != nil {
		sp.id = rand.Uint64() // a guest cannot guess it (takeStdio)
	}
	binary.NativeEndian.PutUint64(buf[16:], sp.id)
	s.byID[sp.id] = sp
	if _, err := s.sock.Write(buf); err != nil {
		delete(s.byID, sp.id)
		sp.closeStdio()
		return nil, ErrSessionClosed
	}
	return sp, nil
}

// takeStdio returns, once, the fds of the spawn whose child asks with id.
func (s *Spawns) takeStdio(id uint64) []*os.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.byID[id]
	if sp == nil {
		return nil
	}
	f := sp.stdio
	sp.stdio = nil
	return f
}

// Spawner is the spawner's host pid (0 before it serves).
func (s *Spawns) Spawner() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spawner
}

// Signal sends sig to the process group of the running program whose
// pid is pid (a program this session started).
func (s *Spawns) Signal(pid int, sig unix.Signal) error {
	s.mu.Lock()
	sp := s.byPid[pid]
	s.mu.Unlock()
	if sp == nil || pid <= 0 {
		return fmt.Errorf("no running program of the session has pid %d", pid)
	}
	if sig < 0 || sig > 64 {
		return fmt.Errorf("bad signal %d", sig)
	}
	sp.Kill(sig)
	return nil
}

// Close ends the session: the spawner exits, and the keeper ends every
// guest process left.
func (s *Spawns) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sock != nil && !s.ended {
		unix.Shutdown(int(s.sock.Fd()), unix.SHUT_WR)
	}
	s.ended = true
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func (sp *Spawn) closeStdio() {
	for _, f := range sp.stdio {
		f.Close()
	}
	sp.stdio = nil
}

// Started waits until the program's process exists; it returns its pid,
// or why it could not start.
func (sp *Spawn) Started() (int, error) {
	<-sp.started
	return sp.pid, sp.err
}

// Done is closed when the program's process has exited and was reaped.
func (sp *Spawn) Done() <-chan struct{} { return sp.done }

// Status is the wait status, once Done; an error if it never ran or the
// session ended first.
func (sp *Spawn) Status() (unix.WaitStatus, error) { return sp.status, sp.err }

// Kill sends sig to the program's process group (it leads one).
func (sp *Spawn) Kill(sig unix.Signal) {
	select {
	case <-sp.started:
	default:
		return
	}
	if sp.pid > 0 {
		unix.Kill(-sp.pid, sig)
	}
}

// giveStdio answers a spawned child's getppid(spawnMagic, id): its
// request's fds become its 0, 1 and 2. It reports false for a call that
// names no waiting spawn, which is then served as the getppid it is.
func giveStdio(s *Spawns, g *guest, n *seccomp.Notif) bool {
	files := s.takeStdio(n.Data.Args[1])
	if files == nil {
		return false
	}
	g.tgid = int(n.Pid)
	resp := seccomp.NotifResp{ID: n.ID, Val: stdioDone}
	for i, f := range files {
		if _, err := g.AddFD(int(f.Fd()), i, false); err != nil {
			resp = seccomp.NotifResp{ID: n.ID, Error: -int32(unix.EBADF)}
			break
		}
	}
	for _, f := range files {
		f.Close()
	}
	g.l.Send(&resp)
	return true
}
