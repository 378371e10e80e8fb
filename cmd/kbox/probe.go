package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kbox-project/kbox/probe"
	"github.com/kbox-project/kbox/trap"
)

// `kbox probe IMAGE-OPTIONS` (docs/agents.md, "kbox probe"): the boundary
// measured. The probe program embedded in kbox (package probe) runs in a
// guest started as `kbox image` with the same options, bound read-only at
// probeGuestDir; kbox compares what it observed with what the options and
// the policy make expected.

const probeUsage = `usage: kbox probe (-r|-R|-S) IMAGE [image options]

Run a battery of probes inside a guest started with the given image
options (--policy, --read-only, --ephemeral, -b, --net, --net-allow,
--syscall-mode, ...; no command): each tries one operation across the
boundary (hidden and read-only paths, host files through /proc, host
processes, signals, ptrace, host devices, the host's loopback, the
metadata address, setuid, limits, refused syscalls) and prints one JSON
line: probe, capability (probe/catalog.json), operation, expected,
observed, errno, verdict. Expected results come from the options and the
policy. Exit status 0 when nothing was more permissive than expected, 1
when something was (named on stderr), 2 for a bad command line or a kbox
built without the probe program, 125 when the guest could not run.
`

// probeGuestDir is where the probe program's host directory is bound.
const probeGuestDir = "/.kbox-probe"

func runProbe(args []string) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "help" {
			fmt.Print(probeUsage)
			return 0
		}
		if a == "--" || a == "-c" || a == "--command" {
			fmt.Fprintf(os.Stderr, "kbox: probe runs its own program: no command\n%s", probeUsage)
			return exitUsage
		}
	}
	o, err := ParseImageArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", err)
		return exitUsage
	}
	for _, b := range o.Binds {
		if b.Dst == probeGuestDir {
			fmt.Fprintf(os.Stderr, "kbox: probe: %s is the probe program's bind\n", probeGuestDir)
			return exitUsage
		}
	}
	prog, err := probe.Program()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kbox: probe: %v\n", err)
		return exitUsage
	}
	self, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("probe: %w", err))
	}

	// The host side: a directory with the program (bound), a marker file
	// beside it (not bound) holding a random token, a loopback listener
	// answering the token.
	dir, err := os.MkdirTemp("", "kbox-probe-")
	if err != nil {
		return fail(fmt.Errorf("probe: %w", err))
	}
	defer os.RemoveAll(dir)
	binDir := filepath.Join(dir, "bin")
	var tok [16]byte
	rand.Read(tok[:])
	token := "kbox-probe-token-" + hex.EncodeToString(tok[:])
	marker := filepath.Join(dir, "marker")
	if err := errors.Join(os.Mkdir(binDir, 0o755),
		os.WriteFile(filepath.Join(binDir, "kbox-probe"), prog, 0o755),
		os.WriteFile(marker, []byte(token+"\n"), 0o644)); err != nil {
		return fail(fmt.Errorf("probe: %w", err))
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return fail(fmt.Errorf("probe: loopback listener: %w", err))
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(token + "\n"))
			c.Close()
		}
	}()

	env := probe.Env{
		ReadOnly: o.ReadOnly,
		Net:      o.Net,
		HostRoot: os.Geteuid() == 0,
		Port:     ln.Addr().(*net.TCPAddr).Port,
	}
	if o.Agent.Policy != nil {
		env.Policy = o.Agent.Policy.P
	}
	env.InProcess = probeTier(o, prog)
	for _, b := range o.Binds {
		env.Binds = append(env.Binds, probe.Bind{Guest: b.Dst, ReadOnly: b.ReadOnly})
	}
	if o.Net {
		np, _ := egress(o)
		env.NetDecide = func(d netip.AddrPort) bool { ok, _ := np.Decide(d); return ok }
	}
	plan := probe.NewPlan(env)
	plan.Params["token"] = token
	plan.Params["marker"] = marker
	plan.Params["parent"] = fmt.Sprint(os.Getpid())
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, marker); err == nil {
			plan.Params["markerrel"] = rel
		}
	}

	cargs := append([]string{"image"}, args...)
	cargs = append(cargs, "-b", binDir+":"+probeGuestDir+":ro", "--", probeGuestDir+"/kbox-probe")
	for _, k := range sortedParamKeys(plan.Params) {
		cargs = append(cargs, k+"="+plan.Params[k])
	}
	cargs = append(cargs, "--")
	cargs = append(cargs, plan.IDs()...)
	cmd := exec.Command(self, cargs...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	runErr := cmd.Run()
	obs, perr := probe.ParseObservations(out.Bytes())
	if runErr != nil && len(obs) == 0 {
		fmt.Fprintf(os.Stderr, "kbox: probe: the guest did not run (%v)\n", runErr)
		return exitSetup
	}
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "kbox: probe: warning: the guest ended with %v\n", runErr)
	}
	if perr != nil {
		fmt.Fprintf(os.Stderr, "kbox: probe: warning: %v\n", perr)
	}

	recs := plan.Judge(obs)
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	counts := map[string]int{}
	for _, r := range recs {
		enc.Encode(r)
		counts[r.Verdict]++
	}
	fmt.Fprintf(os.Stderr, "kbox: probe: %d probes: %d as expected, %d more restrictive, %d skipped, %d more permissive, %d missing\n",
		len(recs), counts[probe.OK], counts[probe.MoreRestrictive], counts[probe.NotRun], counts[probe.MorePermissive], counts[probe.Lost])
	bad := probe.Failed(recs)
	for _, r := range bad {
		what := "MORE PERMISSIVE than expected"
		if r.Verdict == probe.Lost {
			what = "observed nothing"
		}
		fmt.Fprintf(os.Stderr, "kbox: probe: %s: %s (%s): %s: expected %s, observed %s %s\n",
			what, r.Probe, r.Capability, r.Operation, r.Expected, r.Observed, strings.TrimSpace(r.Detail))
	}
	if len(bad) > 0 {
		return 1
	}
	return 0
}

// probeTier is the in-process tier that will run the probe program
// under the options o, or "" for the seccomp tier: auto (with --trusted)
// chooses as runImage will, from the program's ELF.
func probeTier(o *ImageOptions, prog []byte) string {
	mode := o.SyscallMode
	if mode == "auto" && o.Trusted && trap.Available() {
		mode, _ = tierChoice(probeGuestDir+"/kbox-probe", bytes.NewReader(prog), func(string) (io.ReaderAt, error) {
			return nil, errors.New("a static program has no libraries")
		})
	}
	if inProcess(mode) {
		return mode
	}
	return ""
}

func sortedParamKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
