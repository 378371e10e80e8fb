//go:build linux

package seccomp

// Real-kernel tests. The test binary re-executes itself with
// KBOX_SECCOMP_HELPER set; in that mode TestMain becomes the guest: it locks
// its OS thread, installs the filter, hands the listener fd to the parent
// over a socketpair (SCM_RIGHTS), runs its syscalls and reports on stdout.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const helperEnv = "KBOX_SECCOMP_HELPER"

// atFDCWD is a variable so the negative constant converts at run time.
var atFDCWD int32 = unix.AT_FDCWD

// Magic values exchanged between parent and helper.
const (
	ppidAnswer   = 4242
	vreadAnswer  = 7
	openatMarker = 0o4242 // mode argument marking the helper's openat

)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// helperPolicy is the default policy plus sendmsg on host fds, needed to
// hand over the listener fd after the filter is in place.
func helperPolicy() *Policy {
	p := samplePolicy()
	p.HostFD = append(p.HostFD, "sendmsg")
	return p
}

func helperMain(mode string) int {
	const sock = 3 // ExtraFiles[0]
	prog, err := helperPolicy().Assemble()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	// Prepare everything that allocates before the filter is installed.
	oob := unix.UnixRights(0)
	msg := []byte{0}
	fd, used, err := Install(prog, DefaultInstallFlags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	*(*int32)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = int32(fd)
	if used&unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
		msg[0] = 1
	}
	if err := unix.Sendmsg(sock, msg, oob, nil, 0); err != nil {
		return 3
	}
	unix.Close(fd)
	unix.Close(sock)

	if n, ok := strings.CutPrefix(mode, "loop:"); ok {
		count, _ := strconv.Atoi(n)
		for i := 0; i < count; i++ {
			if r, _, _ := unix.Syscall(unix.SYS_GETPPID, 0, 0, 0); r != ppidAnswer {
				return 4
			}
		}
		return 0
	}

	// mode "basic"
	var out strings.Builder
	r, _, _ := unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
	fmt.Fprintf(&out, "getppid=%d", r)
	_, _, e := unix.Syscall(unix.SYS_UNSHARE, 0, 0, 0) // natively succeeds
	fmt.Fprintf(&out, " unshare=%d", e)
	_, _, e = unix.Syscall(unix.SYS_ACCT, 0, 0, 0)
	fmt.Fprintf(&out, " acct=%d", e)
	var c byte = 'x'
	_, _, e = unix.Syscall(unix.SYS_IOCTL, 1, unix.TIOCSTI, uintptr(unsafe.Pointer(&c))) // natively ENOTTY on a pipe
	fmt.Fprintf(&out, " tiocsti=%d", e)
	if runtime.GOARCH == "amd64" {
		_, _, e = unix.Syscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		fmt.Fprintf(&out, " x32=%d", e)
	}
	var buf [16]byte
	r, _, _ = unix.Syscall(unix.SYS_READ, DefaultVirtualFDBase+3, uintptr(unsafe.Pointer(&buf[0])), 0)
	fmt.Fprintf(&out, " vread=%d", r)
	path := []byte("/kbox/virtual\x00")
	r, _, e = unix.Syscall6(unix.SYS_OPENAT, uintptr(uint32(atFDCWD)), uintptr(unsafe.Pointer(&path[0])), unix.O_RDONLY, openatMarker, 0, 0)
	if e != 0 {
		fmt.Fprintf(&out, " addfd=err%d", e)
	} else {
		n, _, _ := unix.Syscall(unix.SYS_READ, r, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		fmt.Fprintf(&out, " addfd=%s", buf[:n])
	}
	fmt.Fprintf(&out, " killable=%d\n", msg[0])
	line := []byte(out.String())
	unix.Syscall(unix.SYS_WRITE, 1, uintptr(unsafe.Pointer(&line[0])), uintptr(len(line)))
	return 0
}

type helper struct {
	cmd    *exec.Cmd
	l      *Listener
	out    bytes.Buffer
	errOut bytes.Buffer
	// killable reports whether WAIT_KILLABLE_RECV was accepted.
	killable bool
}

func startHelper(t testing.TB, mode string) *helper {
	t.Helper()
	if NativeArch() == nil {
		t.Skip("unsupported arch")
	}
	if os.Getenv("KBOX_EMULATED") != "" {
		t.Skip("SKIP (emulated GOARCH under qemu-user): filters need the host kernel of that arch")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	parent, child := os.NewFile(uintptr(fds[0]), "parent"), os.NewFile(uintptr(fds[1]), "child")
	defer parent.Close()
	h := &helper{}
	h.cmd = exec.Command(os.Args[0], "-test.run=^$")
	h.cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	h.cmd.ExtraFiles = []*os.File{child}
	h.cmd.Stdout = &h.out
	h.cmd.Stderr = &h.errOut
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	msg := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fds[0], msg, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n != 1 || oobn == 0 {
		h.cmd.Wait()
		t.Fatalf("no listener fd from helper (n=%d oobn=%d err=%v); stderr: %s", n, oobn, err, h.errOut.String())
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cmsgs) != 1 {
		t.Fatalf("bad control message: %v", err)
	}
	rights, err := unix.ParseUnixRights(&cmsgs[0])
	if err != nil || len(rights) != 1 {
		t.Fatalf("bad SCM_RIGHTS: %v", err)
	}
	h.l = NewListener(rights[0])
	h.killable = msg[0] == 1
	return h
}

func TestKernelNotify(t *testing.T) {
	h := startHelper(t, "basic")
	defer h.l.Close()
	t.Logf("WAIT_KILLABLE_RECV accepted: %v", h.killable)
	a := NativeArch()
	getppid, _ := a.Nr("getppid")
	read, _ := a.Nr("read")
	write, _ := a.Nr("write")
	openat, _ := a.Nr("openat")

	seen := map[uint32]int{}
	var hostWrites, lateIDChecks int
	var lateErr string
	done := make(chan error, 1)
	go func() {
		// As kbox's serving thread: a signal that restarted the ADDFD
		// with SECCOMP_ADDFD_FLAG_SEND below would fail it with
		// EINPROGRESS, the guest answered already (sigmask.go).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer BlockAsyncSignals()()
		var n Notif
		for {
			readable, hup, err := h.l.Poll(-1)
			if err != nil {
				done <- err
				return
			}
			if !readable && hup {
				done <- nil
				return
			}
			if err := h.l.Recv(&n); err == ErrTargetGone {
				continue
			} else if err != nil {
				done <- err
				return
			}
			if err := h.l.IDValid(n.ID); err == ErrTargetGone {
				continue // interrupted before we answered; it will come again
			} else if err != nil {
				done <- fmt.Errorf("IDValid on fresh notification: %v", err)
				return
			}
			nr := uint32(n.Data.Nr)
			seen[nr]++
			if (nr == read || nr == write) && uint32(n.Data.Args[0]) < DefaultVirtualFDBase {
				hostWrites++
			}
			switch {
			case nr == getppid:
				err = h.l.Return(n.ID, ppidAnswer)
				if err == nil {
					// The ID is answered, so it is no longer valid.
					// A second answer fails: EINPROGRESS while the target
					// is waking, ErrTargetGone once it has.
					e1, e2 := h.l.IDValid(n.ID), h.l.Return(n.ID, 1)
					if e1 == ErrTargetGone && (e2 == ErrTargetGone || e2 == unix.EINPROGRESS) {
						lateIDChecks++
					} else {
						lateErr = fmt.Sprintf("IDValid=%v, second Return=%v", e1, e2)
					}
				}
			case nr == read && n.Data.Args[0] == DefaultVirtualFDBase+3:
				err = h.l.Return(n.ID, vreadAnswer)
			case nr == openat && n.Data.Args[3] == openatMarker:
				var p [2]int
				if err = unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
					break
				}
				unix.Write(p[1], []byte("hi"))
				unix.Close(p[1])
				add := NotifAddfd{ID: n.ID, Srcfd: uint32(p[0]), Flags: unix.SECCOMP_ADDFD_FLAG_SEND}
				_, err = h.l.Addfd(&add)
				unix.Close(p[0])
			default:
				// Go runtime housekeeping (mmap, clone, tgkill, ...).
				err = h.l.Continue(n.ID)
			}
			if err != nil && err != ErrTargetGone {
				done <- err
				return
			}
		}
	}()
	werr := h.cmd.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("listener never reported POLLHUP")
	}
	if werr != nil {
		t.Fatalf("helper: %v; stderr: %s", werr, h.errOut.String())
	}
	got := strings.TrimSpace(h.out.String())
	eperm, enosys := int(unix.EPERM), int(unix.ENOSYS)
	want := fmt.Sprintf("getppid=%d unshare=%d acct=%d tiocsti=%d", ppidAnswer, eperm, eperm, eperm)
	if runtime.GOARCH == "amd64" {
		want += fmt.Sprintf(" x32=%d", enosys)
	}
	want += fmt.Sprintf(" vread=%d addfd=hi killable=", vreadAnswer)
	if !strings.HasPrefix(got, want) {
		t.Fatalf("helper reported\n  %q\nwant prefix\n  %q", got, want)
	}
	t.Logf("helper: %s", got)
	t.Logf("notified syscalls (nr→count): %v", seen)
	for _, name := range []string{"unshare", "acct", "ioctl", "sendmsg"} {
		if nr, _ := a.Nr(name); seen[nr] != 0 {
			t.Errorf("%s reached the supervisor; it must be decided in BPF", name)
		}
	}
	if hostWrites != 0 {
		t.Errorf("%d host-fd read/write calls were notified", hostWrites)
	}
	if seen[getppid] != 1 || seen[openat] == 0 {
		t.Errorf("expected notifications missing: getppid=%d openat=%d", seen[getppid], seen[openat])
	}
	if lateIDChecks != 1 {
		t.Errorf("answered notification ID still looked valid: %s", lateErr)
	}
}

// serveLoop answers count getppid notifications (CONTINUE for others).
func serveLoop(h *helper, count int, onFirst func()) error {
	getppid, _ := NativeArch().Nr("getppid")
	var n Notif
	var r NotifResp
	for handled := 0; handled < count; {
		// ErrTargetGone: the runtime's preemption signal interrupted the
		// guest's syscall; it restarts it and we get a new notification.
		if err := h.l.Recv(&n); err == ErrTargetGone {
			continue
		} else if err != nil {
			return err
		}
		if uint32(n.Data.Nr) != getppid {
			if err := h.l.Continue(n.ID); err != nil && err != ErrTargetGone {
				return err
			}
			continue
		}
		r = NotifResp{ID: n.ID, Val: ppidAnswer}
		if err := h.l.Send(&r); err == ErrTargetGone {
			continue
		} else if err != nil {
			return err
		}
		handled++
		if handled == 1 && onFirst != nil {
			onFirst()
		}
	}
	return nil
}

func TestRecvSendNoAllocs(t *testing.T) {
	const runs = 500
	h := startHelper(t, fmt.Sprintf("loop:%d", runs+1))
	defer h.l.Close()
	getppid, _ := NativeArch().Nr("getppid")
	var n Notif
	var r NotifResp
	var failed error
	allocs := testing.AllocsPerRun(runs, func() {
		for {
			err := h.l.Recv(&n)
			if err == ErrTargetGone {
				continue
			} else if err != nil {
				failed = err
				return
			}
			if uint32(n.Data.Nr) == getppid {
				break
			}
			if err := h.l.Continue(n.ID); err != nil && err != ErrTargetGone {
				failed = err
				return
			}
		}
		r = NotifResp{ID: n.ID, Val: ppidAnswer}
		if err := h.l.Send(&r); err != nil {
			failed = err
		}
	})
	// Closing the listener fails any still-pending notification with ENOSYS,
	// so the helper cannot hang if the loop above bailed out early.
	h.l.Close()
	if err := h.cmd.Wait(); err != nil && failed == nil {
		t.Fatalf("helper: %v; stderr: %s", err, h.errOut.String())
	}
	if failed != nil {
		t.Fatal(failed)
	}
	if allocs != 0 {
		t.Errorf("Recv+Send allocate %.1f times per round trip", allocs)
	}
}

func TestSetSyncWakeup(t *testing.T) {
	h := startHelper(t, "loop:1")
	defer h.l.Close()
	err := h.l.SetSyncWakeup()
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("SetSyncWakeup: %v", err)
	}
	t.Logf("SetSyncWakeup: %v", err)
	if err := serveLoop(h, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v; stderr: %s", err, h.errOut.String())
	}
}

// BenchmarkNotifyRoundTrip measures one notified getppid: guest syscall →
// supervisor Recv → Send → guest resumes.
func BenchmarkNotifyRoundTrip(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("syncwakeup=%v", sync), func(b *testing.B) {
			h := startHelper(b, fmt.Sprintf("loop:%d", b.N+1))
			defer h.l.Close()
			if sync {
				if err := h.l.SetSyncWakeup(); err != nil {
					b.Skip(err)
				}
			}
			if err := serveLoop(h, b.N+1, b.ResetTimer); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := h.cmd.Wait(); err != nil {
				b.Fatalf("helper: %v; stderr: %s", err, h.errOut.String())
			}
		})
	}
}
