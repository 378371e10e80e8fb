package main

import (
	"fmt"
	"os"

	"github.com/kbox-project/kbox/audit"
)

const auditUsage = `usage: kbox audit verify FILE [--head HASH]

Check an audit log written with --audit (docs/agents.md): every record's
seq and prev hash. Any edited, inserted, removed or reordered record is
named; with --head (the hash kbox printed at exit, or run's audit_head) a
truncated log, or changed last records, are detected too. Exit status 0
when the log verifies, 1 when it does not, 2 on bad usage.
`

func runAudit(args []string) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Print(auditUsage)
		return 0
	}
	if len(args) < 2 || args[0] != "verify" {
		fmt.Fprint(os.Stderr, auditUsage)
		return exitUsage
	}
	file, head := "", ""
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--head":
			if i+1 >= len(args) {
				fmt.Fprintf(os.Stderr, "kbox: --head needs a hash\n%s", auditUsage)
				return exitUsage
			}
			i++
			head = args[i]
			if len(head) != 64 {
				fmt.Fprintf(os.Stderr, "kbox: --head %q: want the 64 hex digits of a SHA-256\n", head)
				return exitUsage
			}
		case len(a) > 7 && a[:7] == "--head=":
			head = a[7:]
		case file == "" && (a == "-" || a[0] != '-'):
			file = a
		default:
			fmt.Fprintf(os.Stderr, "kbox: unexpected argument %q\n%s", a, auditUsage)
			return exitUsage
		}
	}
	if file == "" {
		fmt.Fprint(os.Stderr, auditUsage)
		return exitUsage
	}
	s, err := audit.VerifyFile(file, head)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kbox: audit %s: FAILED: %v\n", file, err)
		return 1
	}
	fmt.Printf("%s: ok, %d records, head %s\n", file, s.Records, s.Head)
	if head != "" && s.HeadAt != s.Records {
		fmt.Printf("the given head is record %d; %d records were appended after it\n", s.HeadAt, s.Records-s.HeadAt)
	}
	return 0
}
