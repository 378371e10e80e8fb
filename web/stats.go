package web

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// FormatStats writes a one-screen text summary of rec (for --stats):
// wall time, totals, dispositions, the topN syscalls (default 15) and
// the ENOSYS list.
func FormatStats(w io.Writer, rec *Recorder, wall time.Duration, topN int) error {
	if topN <= 0 {
		topN = 15
	}
	total := rec.Total()
	pct := func(n uint64) float64 {
		if total == 0 {
			return 0
		}
		return 100 * float64(n) / float64(total)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	rate := 0.0
	if wall > 0 {
		rate = float64(total) / wall.Seconds()
	}
	fmt.Fprintf(tw, "kbox stats: wall %s, %d syscalls (%.0f/s)\n", wall.Round(time.Millisecond), total, rate)
	d := rec.Dispositions()
	fmt.Fprintf(tw, "dispositions:")
	for i, c := range d {
		fmt.Fprintf(tw, " %s %d (%.1f%%)", Disposition(i), c, pct(c))
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "\nTOP SYSCALLS\tNR\tCOUNT\tSHARE\n")
	counts := rec.SyscallCounts()
	for i, c := range counts {
		if i == topN {
			fmt.Fprintf(tw, "(%d more)\t\t\t\n", len(counts)-topN)
			break
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\n", displayName(c), c.Nr, c.Count, pct(c.Count))
	}
	nosys := rec.ENOSYSCounts()
	if len(nosys) == 0 {
		fmt.Fprintf(tw, "\nENOSYS: none\n")
	} else {
		fmt.Fprintf(tw, "\nENOSYS\tNR\tCOUNT\t\n")
		for i, c := range nosys {
			if i == topN {
				fmt.Fprintf(tw, "(%d more)\t\t\t\n", len(nosys)-topN)
				break
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t\n", displayName(c), c.Nr, c.Count)
		}
	}
	return tw.Flush()
}

func displayName(c SyscallCount) string {
	if c.Name != "" {
		return c.Name
	}
	if c.Nr < 0 {
		return "(out of range)"
	}
	return fmt.Sprintf("syscall_%d", c.Nr)
}
