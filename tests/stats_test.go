package tests

import (
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile is the p-th percentile of v (nearest rank).
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// privateKB is host process pid's private memory (Private_Clean +
// Private_Dirty of smaps_rollup), kB; 0 if unreadable.
func privateKB(pid int) int { return rollupKB(pid, "Private_Clean:", "Private_Dirty:") }

// rollupKB is the sum of the named fields ("Private_Dirty:") of host
// process pid's smaps_rollup, kB; 0 if unreadable.
func rollupKB(pid int, fields ...string) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	kb := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && slices.Contains(fields, f[0]) {
			n, _ := strconv.Atoi(f[1])
			kb += n
		}
	}
	return kb
}

// threadCount is host process pid's number of threads; 0 if unreadable.
func threadCount(pid int) int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return len(ents)
}
