# kbox's GDB helpers. In GDB, attached to kbox (gdb -p PID) or running it
# (gdb --args ./kbox image ...):
#
#     source scripts/gdb/kbox-gdb.py
#
# Commands (docs/gdb-workflow.md has a worked session):
#   kbox-break-syscall NAME [PID]  stop when the engine dispatches NAME
#   kbox-follow LOCATION           break there on this thread only (once)
#   kbox-fdtable [PID]             the guest fd tables, with paths
#   kbox-vfs-path PATH             how kbox places a guest path
#   kbox-task-walk                 LKL's tasks
#   kbox-mem-check                 LKL's zones, free pages, slab caches
#   kbox-syscall-trace [NAME] [N]  one syscall end to end (N of them)
#
# What lives in Go (processes, fds, shadows, path resolutions) is read from
# kbox's debug mirror, plain C memory that the engine fills when kbox runs
# with KBOX_GDB=1 (package gdbmirror, mirror.h). Kernel structures are read
# through liblkl's DWARF; where the default liblkl's reduced DWARF only
# declares a structure (task_struct, kmem_cache), the command says so and
# reads LKL's own /proc through kbox instead.

import os
import posixpath

import gdb

# signals the Go runtime and the supervisor use: never a stop
for _sig in ("SIGURG", "SIGCHLD", "SIGPIPE", "SIGWINCH", "SIGPROF"):
    gdb.execute("handle %s nostop noprint pass" % _sig, to_string=True)

KINDS = {1: "lkl", 2: "held", 3: "listing"}
ROUTES = {
    1: "image",
    2: "host route",
    3: "bind",
    4: "kbox /proc",
    5: "/dev/fd",
}


class Unavailable(Exception):
    """A command cannot work on this kbox: the message says why."""


class C:
    """Evaluate in C whatever language the current frame has (Go)."""

    def __enter__(self):
        self.old = gdb.parameter("language")
        gdb.execute("set language c", to_string=True)

    def __exit__(self, *a):
        gdb.execute("set language %s" % self.old, to_string=True)


def ev(expr):
    with C():
        return gdb.parse_and_eval(expr)


def cstr(v):
    """A C char array as a Python string, up to its NUL."""
    n = v.type.sizeof
    raw = bytes(gdb.selected_inferior().read_memory(v.address, n))
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def arch():
    name = gdb.selected_frame().architecture().name()
    return "x86-64" if "x86-64" in name else name


def live():
    inf = gdb.selected_inferior()
    return inf.pid > 0 and len(inf.threads()) > 0


def mirror():
    """kbox's debug mirror, or Unavailable with the reason."""
    try:
        m = ev("kbox_gdb")
    except gdb.error:
        raise Unavailable("this kbox has no debug mirror (no symbol kbox_gdb: "
                          "built without LKL, or an older kbox)")
    if not live():
        raise Unavailable("no running kbox: attach (gdb -p PID) or run it first")
    if int(m["version"]) == 0:
        raise Unavailable("the debug mirror is off: start kbox with KBOX_GDB=1")
    if int(m["seq"]) % 2:
        raise Unavailable("kbox was stopped while rewriting its mirror: "
                          "continue a moment (or step out) and ask again")
    return m


def sysnr(name):
    """A syscall number from a name or a number, and its name. The names
    are the engine's (kbox_gdb.sysnames); before kbox has started they are
    not there yet, and the number is None: resolve it later (lazy_nr)."""
    if name.isdigit():
        nr = int(name)
        return nr, syscall_name(nr) or name
    names = ev("kbox_gdb.sysnames")
    if not live() or int(ev("kbox_gdb.version")) == 0:
        return None, name
    for nr in range(names.type.range()[1] + 1):
        if cstr(names[nr]) == name:
            return nr, name
    raise Unavailable("no syscall named %s" % name)


def lazy_nr(name):
    """The number of syscall name, once the engine has written the names
    (at its first dispatch, with KBOX_GDB=1); -2 if there is none."""
    names = ev("kbox_gdb.sysnames")
    for nr in range(names.type.range()[1] + 1):
        if cstr(names[nr]) == name:
            return nr
    print("kbox: no syscall named %s: the breakpoint never stops" % name)
    return -2


def syscall_name(nr):
    try:
        names = ev("kbox_gdb.sysnames")
        if 0 <= nr <= names.type.range()[1]:
            return cstr(names[nr])
    except gdb.error:
        pass
    return ""


def enable_hook():
    """Turn the dispatch hook on in a kbox started without KBOX_GDB=1."""
    if live() and int(ev("kbox_gdb_enabled")) == 0:
        gdb.execute("set var kbox_gdb_enabled = 1", to_string=True)
        print("kbox: dispatch hook turned on (kbox_gdb_enabled = 1); the fd "
              "mirror fills as guests make syscalls")


class Command(gdb.Command):
    """A kbox command: Unavailable becomes its one-line reason."""

    def invoke(self, arg, from_tty):
        try:
            self.run(gdb.string_to_argv(arg))
        except Unavailable as e:
            print("%s: cannot on this build: %s" % (self.name, e))

    def run(self, argv):
        raise NotImplementedError


# --- kbox-break-syscall ---------------------------------------------------


class DispatchBreak(gdb.Breakpoint):
    """Stops at kbox_gdb_dispatch for one syscall (and pid)."""

    def __init__(self, nr, name, pid):
        super().__init__("kbox_gdb_dispatch", internal=False)
        self.nr, self.sname, self.pid = nr, name, pid

    def stop(self):
        f = gdb.selected_frame()
        nr, pid = int(f.read_var("nr")), int(f.read_var("pid"))
        if self.nr is None:
            self.nr = lazy_nr(self.sname)
        if nr != self.nr or (self.pid and pid != self.pid):
            return False
        print("kbox: guest pid %d calls %s (nr %d)" % (pid, self.sname, nr))
        return True


class BreakSyscall(Command):
    """kbox-break-syscall NAME [PID]: stop when the engine dispatches
    syscall NAME (a name or a number), for guest thread PID or any. The
    stop is in kbox_gdb_dispatch, before the handler runs: `finish` returns
    into dispatch.(*Engine).gdbDispatch, which calls the handler next."""

    def __init__(self):
        super().__init__("kbox-break-syscall", gdb.COMMAND_BREAKPOINTS)
        self.name = "kbox-break-syscall"

    def run(self, argv):
        if not argv or len(argv) > 2:
            raise Unavailable("usage: kbox-break-syscall NAME [PID]")
        try:
            ev("kbox_gdb_dispatch")
        except gdb.error:
            raise Unavailable("no kbox_gdb_dispatch in this kbox")
        nr, name = sysnr(argv[0])
        pid = int(argv[1]) if len(argv) > 1 else 0
        enable_hook()
        b = DispatchBreak(nr, name, pid)
        print("kbox: breakpoint %d on dispatch of %s (nr %s) for %s"
              % (b.number, name, "?" if nr is None else nr, "pid %d" % pid if pid else "any guest"))
        if not gdb.selected_inferior().pid:
            # kbox has not started: it gets the mirror from its start.
            gdb.execute("set environment KBOX_GDB=1", to_string=True)
            print("kbox: kbox has not started: KBOX_GDB=1 set in its environment")
        elif not live():
            print("kbox: kbox must run with KBOX_GDB=1 for it to stop "
                  "(restart it with: set environment KBOX_GDB=1)")


class FollowThread(Command):
    """kbox-follow LOCATION: a one-time breakpoint on LOCATION (a function,
    `*function` for its first instruction) for the thread stopped now: the
    kbox thread serving this guest call, which runs LKL's syscall code
    itself (LKL runs a syscall on the calling thread)."""

    def __init__(self):
        super().__init__("kbox-follow", gdb.COMMAND_BREAKPOINTS)
        self.name = "kbox-follow"

    def run(self, argv):
        if len(argv) != 1:
            raise Unavailable("usage: kbox-follow LOCATION")
        th = gdb.selected_thread()
        if th is None:
            raise Unavailable("no thread is stopped")
        gdb.execute("tbreak %s thread %d" % (argv[0], th.num))


# --- kbox-fdtable ---------------------------------------------------------


def flag_names(fl):
    acc = {0: "O_RDONLY", 1: "O_WRONLY", 2: "O_RDWR"}[fl & 3]
    out = [acc]
    for bit, n in ((0o100, "O_CREAT"), (0o2000, "O_APPEND"), (0o4000, "O_NONBLOCK"),
                   (0o200000, "O_DIRECTORY"), (0o10000000, "O_PATH")):
        if fl & bit:
            out.append(n)
    return "|".join(out)


def host_fds(pid):
    """The guest's own host fds (below the virtual base): fd, link, dev, ino."""
    d = "/proc/%d/fd" % pid
    out = []
    try:
        names = os.listdir(d)
    except OSError as e:
        return None, str(e)
    for n in sorted(names, key=int):
        p = os.path.join(d, n)
        try:
            link = os.readlink(p)
            st = os.stat(p)
            out.append((int(n), link, st.st_dev, st.st_ino))
        except OSError:
            continue
    return out, ""


class FdTable(Command):
    """kbox-fdtable [PID]: each guest process's fd table: its host fds
    (shadows of image files matched to their node, pipes, terminals) and
    its virtual fds (LKL fds, host fds kbox holds, generated listings)."""

    def __init__(self):
        super().__init__("kbox-fdtable", gdb.COMMAND_DATA)
        self.name = "kbox-fdtable"

    def run(self, argv):
        m = mirror()
        want = int(argv[0]) if argv else 0
        shadows = {}
        for i in range(int(m["nshadows"])):
            s = m["shadows"][i]
            shadows[(int(s["host_dev"]), int(s["host_ino"]))] = (int(s["lkl_fd"]), cstr(s["path"]))
        fds = {}
        for i in range(int(m["nfds"])):
            f = m["fds"][i]
            fds.setdefault(int(f["pid"]), []).append(f)
        shown = 0
        for i in range(int(m["nprocs"])):
            p = m["procs"][i]
            pid = int(p["pid"])
            if want and pid != want:
                continue
            shown += 1
            print("guest pid %d  %s  (cwd %s)" % (pid, cstr(p["exe"]), cstr(p["cwd"])))
            print("  %5s  %-7s %6s %6s  %s" % ("fd", "kind", "lkl", "host", "path"))
            hfds, err = host_fds(pid)
            if hfds is None:
                print("  (host fds unreadable: %s)" % err)
            for fd, link, dev, ino in hfds or []:
                if (dev, ino) in shadows:
                    lfd, path = shadows[(dev, ino)]
                    print("  %5d  %-7s %6d %6s  %s  [content %s]" % (fd, "shadow", lfd, "-", path, link))
                else:
                    print("  %5d  %-7s %6s %6s  %s" % (fd, "host", "-", "-", link))
            for f in fds.get(pid, []):
                kind = KINDS.get(int(f["kind"]), "?")
                lfd, hfd = int(f["lkl_fd"]), int(f["host_fd"])
                print("  %5d  %-7s %6s %6s  %s  %s%s" % (
                    int(f["fd"]), kind, lfd if lfd >= 0 else "-", hfd if hfd >= 0 else "-",
                    cstr(f["path"]), flag_names(int(f["flags"])),
                    " cloexec" if int(f["cloexec"]) else ""))
        if not shown:
            print("kbox-fdtable: no guest process%s in the mirror" % (" %d" % want if want else ""))


# --- kbox-vfs-path --------------------------------------------------------


def clean(p, cwd):
    """kbox's lexical cleaning (dispatch.Clean): absolute, no . or .. or
    double slashes; .. at the root stays at the root."""
    if not p.startswith("/"):
        p = cwd + "/" + p
    c = posixpath.normpath("/" + p)
    return "/" + c.lstrip("/")


def under(p, prefix):
    return p == prefix or p.startswith(prefix.rstrip("/") + "/")


def predict(abs_, config):
    """Where the engine's configuration places abs_ (classify's order:
    binds, kbox's /dev, host routes, the image)."""
    for line in config.splitlines():
        f = line.split()
        if f and f[0] == "bind" and under(abs_, f[1]):
            rel = abs_[len(f[1]):].lstrip("/") or "."
            return 3, f[2], rel, f[3] == "ro"
    for line in config.splitlines():
        f = line.split()
        if f and f[0] == "dev":
            if under(abs_, "/dev/pts"):
                return 3, "(kbox's devpts instance)", abs_[len("/dev/pts"):].lstrip("/") or ".", False
            if under(abs_, "/dev/fd") or abs_ in ("/dev/stdin", "/dev/stdout", "/dev/stderr"):
                return 5, "", abs_, False
    for line in config.splitlines():
        f = line.split()
        if f and f[0] == "route" and under(abs_, f[1]):
            if f[1] == "/proc":
                return 4, "", abs_, False
            return 2, f[1], abs_[len(f[1]):].lstrip("/") or ".", False
    return 1, "", abs_, False


def confinement(route, host, rel, ro):
    if route == 1:
        return "LKL opens %s under its chroot into the image: .. and symlinks cannot leave it" % rel
    if route == 2:
        return ("host route %s: openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS) of %s beneath it"
                % (host, rel))
    if route == 3:
        return "bind of host %s (%s): %s, confined beneath it" % (host, "read-only" if ro else "read-write", rel)
    if route == 4:
        return "kbox's /proc: guest processes only, kernel files from LKL's own proc"
    if route == 5:
        return "the caller's own fd (%s)" % (rel or "the /dev/fd directory")
    return host


class VfsPath(Command):
    """kbox-vfs-path PATH: how kbox resolves a guest path: the lexical
    cleaning, then image, host route, bind or kbox's /proc, and the
    confinement applied. The engine's own resolution of the path is shown
    when a guest used it lately; otherwise the placement is predicted
    from the engine's configuration (and said so)."""

    def __init__(self):
        super().__init__("kbox-vfs-path", gdb.COMMAND_DATA)
        self.name = "kbox-vfs-path"

    def run(self, argv):
        if len(argv) != 1:
            raise Unavailable("usage: kbox-vfs-path PATH")
        m = mirror()
        given = argv[0]
        cwd = "/"
        if int(m["nprocs"]) > 0:
            cwd = cstr(m["procs"][0]["cwd"]) or "/"
        abs_ = clean(given, cwd)
        print("path      %s" % given)
        how = "as given" if abs_ == given else "cleaned lexically%s" % (
            "" if given.startswith("/") else " against the cwd %s of pid %d" % (cwd, int(m["procs"][0]["pid"])))
        print("lexical   %s  (%s)" % (abs_, how))
        if ".." in given.split("/"):
            print("note      the engine walks a path with .. through its links first (link/.. is the"
                  " parent of the link's target); this prediction reads no links")
        best = None
        for i in range(m["resolved"].type.range()[1] + 1):
            r = m["resolved"][i]
            if int(r["seq"]) and (cstr(r["abs"]) == abs_ or given.startswith("/") and cstr(r["given"]) == given) and (best is None or int(r["seq"]) > int(best["seq"])):
                best = r
        if best is not None:
            route = int(best["route"])
            host, rel = cstr(best["host"]), cstr(best["rel"])
            print("placed    %s  (the engine's resolution #%d: pid %d, %s, given %r)" % (
                ROUTES.get(route, "error"), int(best["seq"]), int(best["pid"]),
                syscall_name(int(best["nr"])) or int(best["nr"]), cstr(best["given"])))
            print("confined  %s" % confinement(route, host, rel, int(best["read_only"])))
            return
        route, host, rel, ro = predict(abs_, cstr(m["config"]))
        print("placed    %s  (predicted from the configuration: no guest resolved this path lately)"
              % ROUTES[route])
        print("confined  %s" % confinement(route, host, rel, ro))


# --- kernel snapshots (LKL's own /proc, through kbox) --------------------


def kernel_snapshot():
    """Ask kbox for a fresh snapshot of LKL's /proc and return its
    sections. kbox runs until it is written, with every breakpoint
    disabled meanwhile."""
    m = mirror()
    if not int(m["kernel_served"]):
        raise Unavailable("kbox serves no kernel snapshots: it needs KBOX_GDB=1 at "
                          "start and the kernel's proc (a mount profile: -S, -R)")
    gen = int(m["kernel_gen"]) + 1
    saved = [(b, b.enabled) for b in gdb.breakpoints() or []]
    for b, _ in saved:
        b.enabled = False
    done = gdb.Breakpoint("kbox_gdb_snapshot_done", internal=True, temporary=True)
    done.silent = True
    try:
        gdb.execute("set var kbox_gdb_kernel_req = %d" % gen, to_string=True)
        gdb.execute("continue", to_string=True)
    finally:
        if done.is_valid():
            done.delete()
        for b, en in saved:
            if b.is_valid():
                b.enabled = en
    if int(ev("kbox_gdb.kernel_gen")) < gen:
        raise Unavailable("kbox stopped before writing the kernel snapshot")
    text = cstr(ev("kbox_gdb.kernel"))
    sections, cur = {}, None
    for line in text.splitlines():
        if line.startswith("@@ "):
            cur = line[3:]
            sections[cur] = []
        elif cur:
            sections[cur].append(line)
    return sections


def complete(tname):
    """The struct type if liblkl's DWARF describes its members, else None."""
    try:
        with C():
            t = gdb.lookup_type(tname)
        return t if t.fields() else None
    except (gdb.error, TypeError):
        return None


def counter(v, idx=None):
    """The value of an atomic_long_t (of element idx of an array of them).
    Where liblkl's reduced DWARF only declares the type (the default), it is
    read as the one long it holds (include/linux/types.h), at the address
    DWARF gives the member."""
    if idx is None and v.type.strip_typedefs().fields():
        return int(v["counter"])
    addr = int(v.address) + 8 * (idx or 0)
    with C():
        return int(gdb.parse_and_eval("*(long *)%d" % addr))


def offset_of(t, field):
    for f in t.fields():
        if f.name == field:
            return f.bitpos // 8
    raise Unavailable("%s has no member %s" % (t, field))


class TaskWalk(Command):
    """kbox-task-walk: LKL's tasks: kernel threads and the host-thread
    tasks (hostN) LKL gives each thread that calls into it. With a liblkl
    whose DWARF describes struct task_struct, walks init_task.tasks; with
    the default reduced DWARF, reads LKL's own /proc through kbox (says
    so)."""

    def __init__(self):
        super().__init__("kbox-task-walk", gdb.COMMAND_DATA)
        self.name = "kbox-task-walk"

    def run(self, argv):
        t = complete("struct task_struct")
        if t is not None:
            return self.walk(t)
        print("kbox-task-walk: liblkl's DWARF is reduced (CONFIG_DEBUG_INFO_REDUCED): "
              "struct task_struct has no members; reading LKL's own /proc through kbox")
        s = kernel_snapshot()
        rows = [l.split(None, 4) for l in s.get("tasks", []) if l and not l.startswith("error")]
        print("%6s %6s %6s %-5s %s" % ("tgid", "pid", "ppid", "state", "comm"))
        for r in rows:
            if len(r) == 5:
                print("%6s %6s %6s %-5s %s" % tuple(r))
        print("%d tasks" % len(rows))

    def walk(self, t):
        off = offset_of(t, "tasks")
        ptr = t.pointer()
        with C():
            head = gdb.parse_and_eval("&init_task.tasks")
            cur = head["next"]
            n = 0
            print("%6s %-5s %s" % ("pid", "state", "comm"))
            while int(cur) != int(head) and n < 100000:
                task = (cur.cast(gdb.lookup_type("char").pointer()) - off).cast(ptr).dereference()
                print("%6d %-5d %s" % (int(task["pid"]), int(task["__state"]), cstr(task["comm"])))
                cur = cur["next"]
                n += 1
        print("%d tasks (walked init_task.tasks)" % n)


class MemCheck(Command):
    """kbox-mem-check: LKL's memory: each zone of contig_page_data (pages
    managed, present, free, watermarks, free blocks per order) read through
    DWARF, checked against MemFree of LKL's /proc/meminfo; slab caches from
    /proc/slabinfo through kbox when struct kmem_cache has no members in
    liblkl's DWARF (the default)."""

    def __init__(self):
        super().__init__("kbox-mem-check", gdb.COMMAND_DATA)
        self.name = "kbox-mem-check"

    def run(self, argv):
        if complete("struct zone") is None:
            raise Unavailable("liblkl's DWARF does not describe struct zone")
        with C():
            pgdat = gdb.parse_and_eval("contig_page_data")
            nz = int(pgdat["nr_zones"])
            free_idx = int(gdb.parse_and_eval("(int)NR_FREE_PAGES"))
            page = int(gdb.parse_and_eval("sizeof(struct page)")) if complete("struct page") else 0
        print("zones (contig_page_data.node_zones, DWARF):")
        print("  %-8s %9s %9s %9s %9s  %s" % ("zone", "managed", "present", "free", "min/low/high", "free blocks by order"))
        total_free = 0
        for i in range(nz):
            z = pgdat["node_zones"][i]
            name = z["name"].string() if int(z["name"]) else "?"
            managed = counter(z["managed_pages"])
            free = counter(z["vm_stat"], free_idx)
            wm = [int(z["_watermark"][j]) for j in range(3)]
            orders = [int(z["free_area"][o]["nr_free"]) for o in range(z["free_area"].type.range()[1] + 1)]
            total_free += free
            print("  %-8s %9d %9d %9d %s  %s" % (name, managed, int(z["present_pages"]), free,
                                                  "/".join(map(str, wm)), " ".join(map(str, orders))))
        print("  free pages: %d (%d KiB)" % (total_free, total_free * 4))
        if complete("struct kmem_cache") is not None:
            print("slab caches: struct kmem_cache is described, but walking slab_caches "
                  "is not written yet; reading /proc/slabinfo through kbox")
        else:
            print("slab caches: liblkl's DWARF is reduced: struct kmem_cache has no members; "
                  "reading LKL's /proc/slabinfo and /proc/meminfo through kbox")
        s = kernel_snapshot()
        memfree = None
        for l in s.get("meminfo", []):
            f = l.split()
            if f and f[0] in ("MemTotal:", "MemFree:", "Slab:", "SReclaimable:", "SUnreclaim:"):
                print("  meminfo %-14s %s %s" % (f[0], f[1], f[2] if len(f) > 2 else ""))
                if f[0] == "MemFree:":
                    memfree = int(f[1])
        if memfree is not None:
            verdict = "agrees" if abs(memfree - total_free * 4) <= max(64, memfree // 20) else "DIFFERS"
            print("  check: zones' free pages %d KiB, meminfo MemFree %d KiB: %s" % (total_free * 4, memfree, verdict))
        caches = []
        for l in s.get("slabinfo", []):
            f = l.split()
            if len(f) > 5 and not l.startswith("#") and not l.startswith("slabinfo") and f[1].isdigit():
                caches.append((int(f[1]) * int(f[3]), f[0], int(f[1]), int(f[2]), int(f[3])))
        if not caches:
            err = [l for l in s.get("slabinfo", []) if l.startswith("error")]
            print("  no slab caches read%s" % (": " + err[0] if err else ""))
            return
        caches.sort(reverse=True)
        print("  %d slab caches; largest by bytes in use:" % len(caches))
        print("    %-24s %8s %8s %6s %10s" % ("cache", "active", "objs", "size", "bytes"))
        for b, name, act, num, size in caches[:10]:
            print("    %-24s %8d %8d %6d %10d" % (name, act, num, size, b))


# --- kbox-syscall-trace ---------------------------------------------------


class Trace:
    """One armed trace: which syscall, how many, the thread followed."""

    def __init__(self, nr, name, count):
        self.nr, self.name, self.count, self.thread, self.bps = nr, name, count, None, []
        self.seq = 0

    def off(self):
        for b in self.bps:
            b.enabled = False


class TraceBreak(gdb.Breakpoint):
    def __init__(self, spec, trace, what):
        super().__init__(spec, internal=True)
        self.trace, self.what = trace, what

    def stop(self):
        tr = self.trace
        f = gdb.selected_frame()
        th = gdb.selected_thread().num
        if self.what == "enter":
            nr = int(f.read_var("nr"))
            if tr.nr is None:
                tr.nr = lazy_nr(tr.name)
            if tr.thread is not None or (tr.nr != -1 and nr != tr.nr):
                return False
            tr.thread = th
            tr.seq = int(ev("kbox_gdb.resolved_seq"))
            print("[kbox-trace] dispatch   pid %d %s (nr %d), thread %d" % (
                int(f.read_var("pid")), syscall_name(nr) or "?", nr, th))
            return False
        if th != tr.thread:
            return False
        if self.what == "lkl":
            no = int(f.read_var("no"))
            target = ""
            try:
                with C():
                    fn = gdb.parse_and_eval("syscall_table[%d]" % no)
                target = gdb.execute("info symbol %d" % int(fn), to_string=True).split()[0]
            except gdb.error:
                pass
            print("[kbox-trace]   LKL      lkl_syscall(%d) -> %s" % (no, target or "?"))
            return False
        if self.what == "openat2":
            # liblkl's reduced DWARF has no variable tracking: its
            # argument locations are wrong. At the first instruction the
            # calling convention places them (x86-64: rdi, rsi; arm64:
            # x0, x1); LKL has no MMU, the name is a host address.
            try:
                regs = ("$rdi", "$rsi") if arch() == "x86-64" else ("$x0", "$x1")
                with C():
                    dfd = int(gdb.parse_and_eval("(int)%s" % regs[0]))
                    name = gdb.parse_and_eval("(const char *)%s" % regs[1]).string()
            except (gdb.error, gdb.MemoryError, UnicodeDecodeError):
                dfd, name = "?", "?"
            print("[kbox-trace]   kernel   do_sys_openat2(dfd %s, %r)" % (dfd, name))
            return False
        # done: the paths the engine resolved for the call, and the answer
        m = ev("kbox_gdb")
        pid = int(f.read_var("pid"))
        for i in range(m["resolved"].type.range()[1] + 1):
            r = m["resolved"][i]
            if int(r["seq"]) > tr.seq and int(r["pid"]) == pid:
                print("[kbox-trace]   path     %r -> %s %s" % (
                    cstr(r["given"]), ROUTES.get(int(r["route"]), "error"),
                    cstr(r["rel"]) or cstr(r["host"])))
        val, err = int(f.read_var("val")), int(f.read_var("err"))
        print("[kbox-trace] answered   %s = %d%s" % (
            syscall_name(int(f.read_var("nr"))) or "?", val, " (errno %d)" % err if err else ""))
        tr.thread = None
        tr.count -= 1
        if tr.count <= 0:
            tr.off()
            return True
        return False


class SyscallTrace(Command):
    """kbox-syscall-trace [NAME] [N]: print the path of the next N (1)
    syscalls NAME (any) end to end: dispatch entry (kbox_gdb_dispatch),
    each LKL syscall kbox makes for it (lkl_syscall, with LKL's handler
    from syscall_table), do_sys_openat2 for opens, and the answer
    (kbox_gdb_dispatched); then stop. Run `continue` after it."""

    def __init__(self):
        super().__init__("kbox-syscall-trace", gdb.COMMAND_BREAKPOINTS)
        self.name = "kbox-syscall-trace"

    def run(self, argv):
        try:
            ev("kbox_gdb_dispatched")
        except gdb.error:
            raise Unavailable("no kbox_gdb_dispatched in this kbox")
        nr, name, count = -1, "any syscall", 1
        for i, a in enumerate(argv):
            if a.isdigit() and i > 0:
                count = int(a)
            else:
                nr, name = sysnr(a)
        enable_hook()
        tr = Trace(nr, name, count)
        tr.bps.append(TraceBreak("kbox_gdb_dispatch", tr, "enter"))
        tr.bps.append(TraceBreak("lkl_syscall", tr, "lkl"))
        # at its first instruction, where DWARF places the arguments
        # exactly (after the prologue, the optimised kernel's may not be)
        tr.bps.append(TraceBreak("*do_sys_openat2", tr, "openat2"))
        tr.bps.append(TraceBreak("kbox_gdb_dispatched", tr, "done"))
        print("kbox: tracing %d x %s: dispatch, LKL calls, answer; `continue` to run" % (count, name))


BreakSyscall()
FollowThread()
FdTable()
VfsPath()
TaskWalk()
MemCheck()
SyscallTrace()
