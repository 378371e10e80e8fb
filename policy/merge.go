package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Merge returns base with add's restrictions added: kbox mcp's operator
// policy (base) and an agent's policy for one run (add), or the policy
// files of a repeated `kbox image --policy`. The result is at least as
// strict as base on every rule, and as add on every rule add can give:
//
//   - paths: each file's rules stay a layer of their own, and a path's
//     class is the strictest any layer gives it (Classify), so add's
//     read_write patterns or default loosen nothing base restricts;
//   - syscalls.deny: both lists; where both name the same syscall or
//     family, or base's family holds add's syscall, base's errno applies;
//   - syscalls.quota: each name's smallest count; quota_errno is base's
//     when base has quotas or names one, else add's;
//   - limits: each the smallest of those set (zero is no limit, so add
//     cannot lift one of base's);
//   - network: base's allow lists; deny_all when either has it.
//
// add's network.allow and network.allow_hosts would let the guest reach
// more: they are refused with an error naming them.
func Merge(base, add *Policy) (*Policy, error) {
	if len(add.Network.Allow) > 0 {
		return nil, fmt.Errorf("network.allow %q: an added policy cannot allow destinations (the first policy and the command line decide them); it may set network.deny_all", add.Network.Allow)
	}
	if len(add.Network.AllowHosts) > 0 {
		return nil, fmt.Errorf("network.allow_hosts %q: an added policy cannot allow destinations (the first policy and the command line decide them); it may set network.deny_all", add.Network.AllowHosts)
	}
	m := &Policy{}
	m.layers = append(append([]layer{}, base.layers...), add.layers...)
	m.Paths = Paths{
		Default:   m.Default().String(),
		Hidden:    cat(base.Paths.Hidden, add.Paths.Hidden),
		ReadOnly:  cat(base.Paths.ReadOnly, add.Paths.ReadOnly),
		ReadWrite: cat(base.Paths.ReadWrite, add.Paths.ReadWrite),
	}

	// The engine compiles denials in order, a later one replacing an
	// earlier one's errno: base's come last.
	named := map[string]bool{}
	for _, d := range base.Syscalls.Deny {
		n, _, _ := strings.Cut(d, "=")
		named[n] = true
	}
	for _, d := range add.Syscalls.Deny {
		if n, _, _ := strings.Cut(d, "="); !named[n] {
			m.Syscalls.Deny = append(m.Syscalls.Deny, d)
		}
	}
	m.Syscalls.Deny = append(m.Syscalls.Deny, base.Syscalls.Deny...)
	if len(base.Syscalls.Quota)+len(add.Syscalls.Quota) > 0 {
		m.Syscalls.Quota = map[string]int64{}
		for k, v := range base.Syscalls.Quota {
			m.Syscalls.Quota[k] = v
		}
		for k, v := range add.Syscalls.Quota {
			if old, ok := m.Syscalls.Quota[k]; !ok || v < old {
				m.Syscalls.Quota[k] = v
			}
		}
	}
	m.Syscalls.QuotaErrno = base.Syscalls.QuotaErrno
	if base.Syscalls.QuotaErrno == "" && len(base.Syscalls.Quota) == 0 {
		m.Syscalls.QuotaErrno = add.Syscalls.QuotaErrno
	}

	b, a := base.Limits, add.Limits
	m.Limits = Limits{
		WallTime:     minSet(b.WallTime, a.WallTime),
		CPUTime:      minSet(b.CPUTime, a.CPUTime),
		AddressSpace: minSet(b.AddressSpace, a.AddressSpace),
		Processes:    minSet(b.Processes, a.Processes),
		FileSize:     minSet(b.FileSize, a.FileSize),
		ImageWrites:  minSet(b.ImageWrites, a.ImageWrites),
	}

	m.Network = Network{
		Allow:      cat(base.Network.Allow, nil),
		AllowHosts: cat(base.Network.AllowHosts, nil),
		DenyAll:    base.Network.DenyAll || add.Network.DenyAll,
	}

	m.Sources = append(sources(base), sources(add)...)
	sum := sha256.Sum256([]byte(strings.Join(m.Sources, "\n")))
	m.SHA256 = hex.EncodeToString(sum[:])
	return m, nil
}

// sources are the file hashes p came from.
func sources(p *Policy) []string {
	if len(p.Sources) > 0 {
		return p.Sources
	}
	return []string{p.SHA256}
}

func cat(a, b []string) []string {
	if len(a)+len(b) == 0 {
		return nil
	}
	return append(append([]string{}, a...), b...)
}

// minSet is the smaller of two limits, zero (no limit) counting as none.
func minSet[T ~int | ~int64](a, b T) T {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
