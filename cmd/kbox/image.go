package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"github.com/kbox-project/kbox/seccomp/supervisor"
	"github.com/kbox-project/kbox/shadowfd"
	"github.com/kbox-project/kbox/trap"
	"golang.org/x/sys/unix"
)

// notSupportedError names an option whose feature is not built yet.
type notSupportedError struct{ what string }

func (e *notSupportedError) Error() string { return e.what + ": not supported yet" }

// unsupported lists the requested features this build cannot provide yet;
// they are refused, never silently ignored.
func unsupported(o *ImageOptions) error {
	var missing []string
	if o.SyscallMode == "auto" {
		// auto picks per command once the program can be read (runGuest,
		// auto.go); these choose seccomp before that.
		switch {
		case !o.Trusted:
			o.SyscallMode, o.TierWhy = "seccomp", autoUntrusted
		case !trap.Available():
			o.SyscallMode, o.TierWhy = "seccomp", "auto: this build has no in-process tier"
		}
	}
	if (o.SyscallMode == "trap" || o.SyscallMode == "rewrite") && !trap.Available() {
		missing = append(missing, "--syscall-mode="+o.SyscallMode)
	}
	if len(missing) > 0 {
		return &notSupportedError{what: strings.Join(missing, ", ")}
	}
	return nil
}

func rootOptions(o *ImageOptions) rootfs.Options {
	opt := rootfs.Options{
		FSType:    o.FSType,
		Partition: o.Partition,
		ReadOnly:  o.ReadOnly,
		MountOpts: o.MountOpts,
		Kernel:    lkl.Config{Cmdline: o.Cmdline, Verbose: o.Verbose},
		TmpSize:   o.TmpSize,
	}
	// The guest always has a network, its loopback at least (net.go):
	// sockets' buffers and a kernel task per host thread in LKL. At 32M
	// 100 busy connections ran LKL out of memory, and 200 on the
	// loopback made its TCP abort closed sockets' last data; at 64M two
	// 200 MB echoes on the loopback took 10 s, 2.8 s at 128M
	// (docs/networking.md, "Without --net: the loopback alone").
	opt.Kernel.MemMB = netMemMB
	switch {
	case o.MountProfile == "minimal":
		opt.Profile = rootfs.ProfileMinimal
	case o.MountProfile == "full" || o.Mode != RootRaw:
		opt.Profile = rootfs.ProfileFull
	}
	return opt
}

func runImage(args []string) int {
	setRunGC()
	o, err := ParseImageArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", err)
		return exitUsage
	}
	if o.Help {
		fmt.Print(imageUsage + agentUsage)
		return 0
	}
	if err := checkServe(o); err != nil {
		return fail(err)
	}
	if err := unsupported(o); err != nil {
		return fail(err)
	}
	if strings.HasPrefix(o.Image, dockerPrefix) {
		cleanup, err := pullForRun(o)
		if err != nil {
			return fail(err)
		}
		defer cleanup()
	}
	if err := applyImageConfig(o); err != nil {
		return fail(err)
	}
	if inProcess(o.SyscallMode) && !o.Trusted {
		fmt.Fprintln(os.Stderr, notConfined(o.SyscallMode))
	}
	if inProcess(o.SyscallMode) || o.SyscallMode == "auto" {
		// Before anything kbox keeps is opened: the guest's fds are
		// the low numbers of kbox's own table (trap/fds.go).
		if trapFDs, err = trap.Prepare(); err != nil {
			return fail(err)
		}
	}
	binds, err := openBinds(o)
	if err != nil {
		return fail(err)
	}
	defer closeBinds(binds)
	phases.mark("options+binds")
	if !lkl.Available {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", lkl.ErrNotBuilt)
		return exitUsage
	}
	// The agent options (agent.go): a copy-on-write layer, the audit
	// log, a timeout, the report; finished once the kernel has let go of
	// the image.
	ag, err := startAgent(o)
	if err != nil {
		return fail(err)
	}
	phases.mark("agent")
	status, err := ag.finish(bootAndRun(o, binds, ag))
	phases.mark("finish")
	phases.print()
	if err != nil {
		return fail(err)
	}
	return status
}

// bootAndRun boots the kernel on the image, runs the guest and unmounts.
func bootAndRun(o *ImageOptions, binds []*guestpath.Bind, ag *agentRun) (int, error) {
	var pre *supervisor.Prespawned
	if o.SyscallMode == "seccomp" && o.Agent.Serve == "" {
		// The guest's start-up process begins beside the boot
		// (supervisor.Prespawn); a run that ends before its guest ends it.
		pre = supervisor.PrespawnEarly(os.Getenv("KBOX_NAMESPACES") == "off")
		defer pre.Abandon()
	}
	if !o.ReadOnly {
		// Not root: the content store's helper starts beside the boot
		// (shadowfd.Prestart), not at the guest's first writable shadow.
		shadowfd.Prestart()
		defer shadowfd.CloseEarly()
	}
	gnet, err := addNetDev(o) // before boot
	if err != nil {
		return 0, err
	}
	img, err := rootfs.OpenImage(o.Image, o.FSType, o.Partition, ag.imageReadOnly(o))
	if err != nil {
		return 0, err
	}
	ropt := rootOptions(o)
	ropt.Overlay = ag.overlayLayer() // --ephemeral, --overlay: writes go to the overlay
	// From boot until the guest may run, a kernel panic starts kbox once
	// more (lkl.SetStarting; runGuest ends it).
	lkl.SetStarting(true)
	phases.mark("image")
	root, err := rootfs.Setup(img, ropt)
	if err != nil {
		img.Close()
		return 0, err
	}
	phases.mark("mounts")
	phases.split("boot", root.KernelTime)
	if v := os.Getenv("KBOX_TEST_PANIC_AT_START"); v == "always" || v != "" && !lkl.Restarted() {
		lkl.Panic() // tests only (docs/testing.md)
	}
	defer func() {
		if ag.discardsWrites(o) && root.Leave() {
			// Nothing of the kernel outlives the run: the process's exit
			// ends it, with no unmount or halt (docs/benchmarks.md).
			if ag != nil {
				ag.left = true
			}
			phases.mark("leave")
			return
		}
		// Unmounted and detached; the process's exit ends the kernel.
		if err := root.Finish(); err != nil {
			fmt.Fprintf(os.Stderr, "kbox: warning: %v\n", err)
		}
		phases.mark("close")
		phases.split("unmount", root.UnmountTime)
	}()
	if o.Verbose {
		fmt.Fprintf(os.Stderr, "kbox: booted and mounted %s in %v (mounts: %s)\n", o.Image, root.BootTime, strings.Join(root.Mounts, " "))
		if ok, how := lkl.HostHugePages(); root.HugeFrom >= 0 && ok {
			fmt.Fprintf(os.Stderr, "kbox: the kernel's memory asks for huge pages from %d MB on (%s)\n", root.HugeFrom>>20, how)
		}
		if root.Scratch != "" {
			fmt.Fprintf(os.Stderr, "kbox: %s\n", root.Scratch)
		}
	}
	for _, w := range root.Warnings {
		fmt.Fprintf(os.Stderr, "kbox: warning: %s\n", w)
	}
	gnet.subscribe(ag.netHook()) // --audit: a record per connection
	procDir, hasProc := root.KernelProc()
	if !hasProc {
		procDir = -1
	}
	if err := gnet.start(o, procDir); err != nil {
		return 0, fmt.Errorf("--net: %w", err)
	}
	phases.mark("net")
	defer gnet.close()
	return runGuest(o, root, binds, ag, gnet, pre)
}

func runGuest(o *ImageOptions, root *rootfs.Root, binds []*guestpath.Bind, ag *agentRun, gnet *guestNet, pre *supervisor.Prespawned) (int, error) {
	lkl.SetStarting(false) // the guest may run from here: a panic ends kbox
	if err := applyImageUser(o); err != nil {
		return 0, err
	}
	var path string
	if o.Agent.Serve == "" {
		var err error
		if path, err = findProgram(o.Command[0], o.WorkDir, imagePathVar(o), binds, hostRoutes(root)); err != nil {
			fmt.Fprintf(os.Stderr, "kbox: %s: %v\n", o.Command[0], err)
			return exitNotFound, nil
		}
	}
	opt := dispatch.Options{
		VirtualFDs: trapFDs, // 0: the default (seccomp tier)
		RootID:     o.RootID,
		HostRoutes: hostRoutes(root),
		Dev:        root.Mounted("/dev"),
		NetFiles:   o.Net, // kbox's resolv.conf and hosts (netconf; dispatch/sys_file_etc.go)
		Binds:      binds,
		Policy:     o.Agent.Policy, // --policy (policy.go)
		CopyFile:   root.CopyFile,  // programs and shadows, from the image's blocks
	}
	if err := guestpath.CheckBindsInImage(binds); err != nil {
		return 0, err
	}
	if o.ChangeID != nil {
		opt.ChangeID, opt.UID, opt.GID = true, o.ChangeID.UID, o.ChangeID.GID
	}
	// The guest's /proc/sys, /proc/net, fd links and mount table come from
	// the kernel's own proc, outside the guest's root (package procfs).
	opt.KernelProc, opt.HasKernelProc = root.KernelProc()
	if v := os.Getenv("KBOX_SHADOW_MAX"); v != "" {
		// Tuning and tests: files above this many bytes are served through
		// virtual fds instead of memfd shadows (docs/tiers.md).
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("KBOX_SHADOW_MAX=%q: want a byte count", v)
		}
		opt.ShadowMax = n
	}
	eng := dispatch.New(opt)
	if gnet != nil {
		eng.Net = gnet.inet
	}
	// What guests wrote goes to the image before it is unmounted; on the
	// error paths too (the normal path closes it below, and checks).
	defer eng.Close()
	dispatch.InitLKL() // umask 0 (kbox applies the guest's), the image's hostname
	if fd, ok := root.ScratchFile(); ok {
		// What guests write to /tmp is bounded by the host's free space
		// too (the scratch disk is a sparse host file).
		if st, err := lkl.Stat("/tmp", false); err == nil {
			eng.Shadows.HostBacked(st.Dev, fd)
		}
	}
	if path != "" {
		// The program, its loader and libraries read while the guest
		// starts (dispatch/warm.go).
		eng.Prewarm(path)
	}
	if n, cut := eng.ScanHidden(); cut || n > 0 && o.Verbose {
		fmt.Fprintf(os.Stderr, "kbox: policy: %d hidden files have other names (hard links), hidden by inode%s\n", n, map[bool]string{true: "; the scan stopped early: some may be missed", false: ""}[cut])
	}
	if err := eng.ImageWriteQuota(); err != nil {
		return 0, fmt.Errorf("limits.image_writes: %w", err)
	}
	ob, err := newObservatory(o, kernelSource{readProc: root.ReadKernelProc, eng: eng})
	if err != nil {
		return 0, err
	}
	defer ob.close()
	gnet.subscribe(ob.netHook()) // the stack's decisions: /api/net, SSE, trace
	if o.Stats && o.Agent.Policy != nil {
		defer printRefusals(o.Agent.Policy)
	}
	eng.Observe = ob.hook()
	ag.attach(eng, root.ReadKernelProc) // the agent options' exec hook, counters, sampling, timeout
	defer ag.detach()
	eng.Debug = os.Getenv("KBOX_DEBUG") != ""
	if o.SyscallMode == "auto" {
		o.SyscallMode, o.TierWhy = chooseTier(o, path, eng)
	}
	if !inProcess(o.SyscallMode) {
		// --trusted reserved the guest's fd range in kbox's table
		// (main.go), in case auto chose an in-process tier: the seccomp
		// tier's guest is a process of its own, and a thousand
		// placeholders would only slow each look for a shadow's holders.
		trap.Release()
	}
	if o.Verbose {
		fmt.Fprintf(os.Stderr, "kbox: tier %s (%s)\n", o.SyscallMode, tierWhy(o))
	}
	ob.setTier(o.SyscallMode, tierWhy(o))
	phases.mark("engine")
	phaseHook, stopSettle := settleOnStart()
	var status int
	if inProcess(o.SyscallMode) {
		status, err = runTrap(o, path, eng, phaseHook)
		var ie *trap.InstallError
		if errors.As(err, &ie) && strings.HasPrefix(o.TierWhy, "auto:") {
			// Nothing of the guest ran: the seccomp tier runs it.
			if o.Verbose {
				fmt.Fprintf(os.Stderr, "kbox: %s tier not available (%v): seccomp tier\n", o.SyscallMode, err)
			}
			trap.Release()
			o.SyscallMode, o.TierWhy = "seccomp", "auto: the in-process tier failed to install: "+err.Error()
			ob.setTier(o.SyscallMode, tierWhy(o))
			err = nil
		}
	}
	var sess *sessionServer
	var spawns *supervisor.Spawns
	if o.Agent.Serve != "" {
		spawns = supervisor.NewSpawns()
		if sess, err = listenSession(o, spawns, root, binds, withEnv(guestEnv(o), o.Agent.Env), eng, ag); err != nil {
			return 0, err
		}
		go sess.run()
	}
	if !inProcess(o.SyscallMode) {
		status, err = supervisor.Run(supervisor.Config{
			Argv:    o.Command,
			Env:     withEnv(guestEnv(o), o.Agent.Env),
			Path:    path,
			WorkDir: o.WorkDir,
			Engine:  eng,
			Debug:   eng.Debug,
			Verbose: o.Verbose,
			// Tests and debugging: the guest without namespaces of its own,
			// as where none can be made (docs/security.md).
			NoNamespaces: os.Getenv("KBOX_NAMESPACES") == "off",
			Session:      spawns,
			Phase:        phaseHook,
			Pre:          pre,
		})
		if sess != nil {
			sess.close()
		}
		if o.Stats {
			fmt.Fprintf(os.Stderr, "kbox: tier seccomp (%s)\n", tierWhy(o))
		}
	}
	stopSettle()
	phases.mark("exit")
	// A write-back that fails here lost data no guest call reported: kbox
	// fails (exit status 125) rather than pass on the guest's status.
	defer phases.mark("write-back")
	if ag.discardsWrites(o) && root.Leave() {
		eng.Leave() // nothing to write back (bootAndRun leaves the kernel)
	} else if cerr := eng.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("writing the guest's files back to the image failed, their data is lost: %w", cerr)
	}
	return status, err
}

const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// guestEnv is the guest's environment: a clean one, keeping only the
// terminal type from the host.
func guestEnv(o *ImageOptions) []string {
	home := "/"
	if o.RootID {
		home = "/root"
	}
	env := []string{"PATH=" + guestPath, "HOME=" + home, "PWD=" + o.WorkDir, "SHELL=/bin/sh"}
	if t := os.Getenv("TERM"); t != "" {
		env = append(env, "TERM="+t)
	}
	return imageEnv(o, env)
}

// findProgram finds a command in the image or a bind: a path with a slash
// as given (relative to the work dir), otherwise the first executable
// regular file on PATH.
func findProgram(name, workdir, searchPath string, binds []*guestpath.Bind, routes []string) (string, error) {
	stat := func(p string) (uint32, error) {
		if b := guestpath.BindOf(binds, p); b != nil {
			st, err := b.Stat(p)
			if err != unix.EXDEV {
				return st.Mode, err
			}
			// A link in the bind leads out of it: followed in the
			// guest's tree, as the exec will.
			q, en := dispatch.FollowPath(binds, routes, p)
			if en != 0 {
				return 0, en
			}
			if b = guestpath.BindOf(binds, q); b != nil {
				st, err = b.Stat(q)
				return st.Mode, err
			}
			p = q
		}
		st, err := lkl.Stat(p, false)
		return st.Mode, err
	}
	if strings.Contains(name, "/") {
		p := guestpath.Clean(workdir, name)
		if _, err := stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, dir := range strings.Split(searchPath, ":") {
		p := guestpath.Clean("/", dir+"/"+name)
		if mode, err := stat(p); err == nil && mode&unix.S_IFMT == unix.S_IFREG && mode&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("command not found in the image")
}
