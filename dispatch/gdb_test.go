package dispatch

import "testing"

func TestTaskLine(t *testing.T) {
	for _, c := range []struct {
		tgid       int
		stat, want string
	}{
		{2, "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0", "2 2 0 S kthreadd\n"},
		{23, "23 (jbd2/vda-8) S 2 0 0", "23 23 2 S jbd2/vda-8\n"},
		// a thread of task 1; a name with ") " in it: the last ')' ends it
		{1, "7 (a) b) R 0 0", "1 7 0 R a) b\n"},
		{1, "", ""},
		{1, "9 (cut", ""},
		{1, "9 (x) S", ""},
	} {
		if got := taskLine(c.tgid, c.stat); got != c.want {
			t.Errorf("taskLine(%d, %q) = %q, want %q", c.tgid, c.stat, got, c.want)
		}
	}
}
