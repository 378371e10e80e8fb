package procfs

import "testing"

func TestParseStat(t *testing.T) {
	// A command with spaces and parentheses: the fields start after the
	// last ')'.
	s := "4242 (a b) c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 3 2 20 0 1 0 12345 1000 100 18446744073709551615\n"
	got, ok := parseStat(s)
	if !ok || got != (procStatFields{state: 'S', utime: 17, stime: 5, cutime: 3, cstime: 2}) {
		t.Errorf("parseStat: %+v %v", got, ok)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x 1 2 3"} {
		if _, ok := parseStat(bad); ok {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestSystemTexts(t *testing.T) {
	s := guestSample{tasks: 5, running: 1, blocked: 1, procs: 3, lastPid: 777, user: 300, sys: 100}
	if got := formatLoadavg(s); got != "0.00 0.00 0.00 1/5 777\n" {
		t.Errorf("loadavg %q", got)
	}
	if got := formatUptime(12345, 2, 400); got != "123.45 242.90\n" {
		t.Errorf("uptime %q", got)
	}
	if got := formatUptime(100, 1, 500); got != "1.00 0.00\n" { // busier than the clock: idle 0
		t.Errorf("uptime %q", got)
	}
	got := formatStat([]string{"cpu0", "cpu1"}, 1000, 1700000000, s)
	want := "cpu  300 0 100 1600 0 0 0 0 0 0\n" +
		"cpu0 150 0 50 800 0 0 0 0 0 0\n" +
		"cpu1 150 0 50 800 0 0 0 0 0 0\n" +
		"intr 0\nctxt 0\nbtime 1700000000\nprocesses 3\nprocs_running 1\nprocs_blocked 1\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n"
	if got != want {
		t.Errorf("stat:\n%s\nwant:\n%s", got, want)
	}
}
