package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/policy"
	"github.com/kbox-project/kbox/usernet"
	"golang.org/x/sys/unix"
)

// --policy FILE and `kbox policy check FILE` (docs/agents.md): the policy
// is read and checked when the options are parsed (a bad file is a usage
// error, exit status 2), its network rules become --net-allow and
// --net-deny-all, its wall time --timeout, and the engine enforces the
// rest (dispatch/policy.go).

const policyUsage = `usage: kbox policy check FILE

Read a policy file (TOML, docs/agents.md), check it and print the policy
in effect, defaults filled in. Exit status 0 when the file is good, 2 when
it is not (the error names the key).
`

func init() {
	imageOpts = append(imageOpts, optSpec{"", "policy", true, false, func(o *ImageOptions, v string, _ bool) error {
		c, file, err := addPolicy(o.Agent.Policy, v)
		if err != nil {
			return usagef("--policy: %v", err)
		}
		o.Agent.Policy = c
		return applyPolicyOptions(o, file)
	}})
}

// addPolicy reads the policy file and, when cur is not nil, merges it
// into cur: a later --policy only adds restrictions (policy.Merge). It
// returns the compiled policy and the file's own.
func addPolicy(cur *dispatch.Policy, file string) (*dispatch.Policy, *policy.Policy, error) {
	c, err := loadPolicy(file)
	if err != nil {
		return nil, nil, err
	}
	if cur == nil {
		return c, c.P, nil
	}
	m, err := policy.Merge(cur.P, c.P)
	if err != nil {
		return nil, nil, fmt.Errorf("policy %s: %w", file, err)
	}
	mc, err := dispatch.CompilePolicy(m)
	if err != nil {
		return nil, nil, fmt.Errorf("policy %s: %w", file, err)
	}
	return mc, c.P, nil
}

// loadPolicy reads, checks and compiles a policy file.
func loadPolicy(file string) (*dispatch.Policy, error) {
	if file == "" {
		return nil, fmt.Errorf("empty path")
	}
	p, err := policy.Load(file)
	if err != nil {
		return nil, err
	}
	return checkPolicy(file, p)
}

// checkPolicy checks what package policy cannot (the network rules, the
// syscall names) and compiles p, read from file.
func checkPolicy(file string, p *policy.Policy) (*dispatch.Policy, error) {
	for _, a := range p.Network.Allow {
		if _, err := usernet.ParseRule(a); err != nil {
			return nil, fmt.Errorf("policy %s: network.allow: %v", file, err)
		}
	}
	for _, h := range p.Network.AllowHosts {
		if _, err := usernet.ParseHostRule(h); err != nil {
			return nil, fmt.Errorf("policy %s: network.allow_hosts: %v", file, err)
		}
	}
	c, err := dispatch.CompilePolicy(p)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", file, err)
	}
	return c, nil
}

// applyPolicyOptions maps the policy's wall time onto --timeout (the
// shorter wins). Its network rules join the command line's where the
// network is made (egress): without --net there is no network for them
// to bound.
func applyPolicyOptions(o *ImageOptions, p *policy.Policy) error {
	if d := time.Duration(p.Limits.WallTime); d > 0 && (o.Agent.Timeout == 0 || d < o.Agent.Timeout) {
		o.Agent.Timeout = d
	}
	return nil
}

// egress is the run's network policy and allowed host names:
// --net-allow, --net-allow-host and --net-deny-all with the policy's
// [network] rules added (checked when it was loaded).
func egress(o *ImageOptions) (usernet.Policy, []usernet.HostRule) {
	pol := usernet.Policy{Allow: append([]usernet.Rule{}, o.NetAllow...), DenyAll: o.NetDenyAll}
	hosts := append([]usernet.HostRule{}, o.NetAllowHost...)
	if o.Agent.Policy == nil {
		return pol, hosts
	}
	n := o.Agent.Policy.P.Network
	for _, a := range n.Allow {
		if r, err := usernet.ParseRule(a); err == nil {
			pol.Allow = append(pol.Allow, r)
		}
	}
	for _, v := range n.AllowHosts {
		if h, err := usernet.ParseHostRule(v); err == nil {
			hosts = append(hosts, h)
		}
	}
	pol.DenyAll = pol.DenyAll || n.DenyAll
	return pol, hosts
}

func runPolicy(args []string) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Print(policyUsage)
		return 0
	}
	if len(args) != 2 || args[0] != "check" {
		fmt.Fprint(os.Stderr, policyUsage)
		return exitUsage
	}
	c, err := loadPolicy(args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", err)
		return exitUsage
	}
	fmt.Printf("# %s: ok; the policy in effect:\n", args[1])
	fmt.Print(c.P.Effective())
	if len(c.NotEnforced) > 0 {
		fmt.Printf("# not enforced (these run natively, kbox never sees them): %s\n", strings.Join(c.NotEnforced, ", "))
	}
	return 0
}

// policyRun is a run's policy reporting: refusals in the audit log (at
// most auditRefusalsMax records a run, the rest counted) and on stderr
// with --stats.
type policyRun struct {
	pol     *dispatch.Policy
	logged  atomic.Int64
	dropped atomic.Int64
}

// auditRefusalsMax bounds the refusal records of one run: a guest looping
// on a denied call must not fill the disk.
const auditRefusalsMax = 1000

// onRefuse is the engine's OnRefuse with --audit.
func (a *agentRun) onRefuse(x *dispatch.Refusal) {
	if a.log == nil {
		return
	}
	if a.pol.logged.Add(1) > auditRefusalsMax {
		a.pol.dropped.Add(1)
		return
	}
	data := map[string]any{"pid": x.Pid, "syscall": x.Syscall, "rule": x.Rule, "errno": unix.ErrnoName(x.Errno)}
	if x.Path != "" {
		data["path"] = x.Path
	}
	a.log.Append("policy_refusal", data)
}

// printRefusals writes the --stats line of the policy's refusals.
func printRefusals(c *dispatch.Policy) {
	m := c.Refusals()
	if len(m) == 0 {
		fmt.Fprintf(os.Stderr, "kbox: policy: no call refused\n")
		return
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	fmt.Fprintf(os.Stderr, "kbox: policy refused: %s\n", strings.Join(parts, ", "))
}
