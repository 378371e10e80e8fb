#!/usr/bin/env python3
"""switch_causes: kbox's context switches per unit of work, by cause.

Reads `perf script -F comm,ip,sym` output of a `perf record -e
sched:sched_switch -g` run and attributes each switch to what the thread
that switched out was doing, from its user-space stack (kernel frames
are skipped). For docs/networking.md ("Connections per second").

    perf record -e sched:sched_switch -g -o sw.data -- \\
        ./kbox image -S rootfs-tests.ext4 --read-only --syscall-mode=seccomp --net \\
        --net-allow 127.0.0.1:PORT -- /opt/tests/inet conns 10.0.2.2 PORT 1000
    perf script -i sw.data -F comm,ip,sym > sw.txt
    scripts/switch_causes.py sw.txt 1000      # switches per connection

The guest's own switches are those of the command named GUEST (default
"inet"); every other command is kbox (or its keeper).
"""
import collections
import sys

RULES = [
    # (cause, any of these in the stack)
    ("Go sysmon sleeping", ("runtime.sysmon",)),
    ("Go waking a thread (preempted at the wake-up)", ("runtime.notewakeup",)),
    ("Go thread parking (no work: stopm, netpoll, steal)",
     ("runtime.stopm", "runtime.findRunnable", "runtime.park_m", "runtime.stoplockedm",
      "runtime.goexit0", "runtime.runqsteal", "runtime.exitsyscallNoP", "runtime.lock2",
      "runtime.semasleep")),
    ("kbox: seccomp notifications (Recv, Addfd, Send)", ("seccomp.(*Listener)",)),
    ("kbox: the socket reaper's epoll_wait", ("dispatch.(*Inet).reap",)),
    ("kbox: host fds (the pairs, the dial, the splice, the eventfd)",
     ("net.(*", "internal/poll", "net.sys", "net.socket", "os.(*File)", "x/sys/unix")),
    ("the device (lkl/netdev.c)", ("nd_rx", "nd_tx", "kbox_netdev")),
    ("LKL's host threads and Go threads waiting in C (LKL's CPU, LKL tasks)",
     ("lkl_", "jmp_buf", "do_idle", "idle_host_task", "thread_bootstrap", "worker_thread",
      "smpboot", "__futex_abstimed", "sem_", "syscall", "__sigtimedwait", "kthread",
      "[unknown]")),
]


def cause(comm, frames, guest):
    if comm == guest:
        return "the guest process"
    user = [sym for ip, sym in frames if not ip.startswith("ffffffff")]
    stack = " < ".join(user[:12])
    for name, keys in RULES:
        if any(k in stack for k in keys):
            return name
    if not user:
        return RULES[-1][0]
    return "preempted while running (Go, gVisor or LKL code)"


def samples(path):
    comm, frames = None, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if comm is not None:
                    yield comm, frames
                comm, frames = None, []
            elif not line.startswith("\t"):
                if comm is not None:
                    yield comm, frames
                comm, frames = line.split()[0], []
            else:
                parts = line.split(None, 1)
                if len(parts) == 2:
                    frames.append((parts[0], parts[1]))
    if comm is not None:
        yield comm, frames


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: switch_causes.py PERF_SCRIPT_OUTPUT UNITS [GUEST]")
    path, units = sys.argv[1], float(sys.argv[2])
    guest = sys.argv[3] if len(sys.argv) > 3 else "inet"
    counts = collections.Counter(cause(c, fr, guest) for c, fr in samples(path))
    print("%6.1f  all" % (sum(counts.values()) / units))
    for name, n in counts.most_common():
        print("%6.1f  %s" % (n / units, name))


if __name__ == "__main__":
    main()
