package agent

import "testing"

// TestWarmable: which one-shot runs a pooled kernel (the operator's
// policy and network, nothing of the agent's) may serve.
func TestWarmable(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name      string
		pool, net bool // the server's --warm-pool and --net
		in        RunIn
		want      bool
	}{
		{"plain", true, false, RunIn{}, true},
		{"no pool", false, false, RunIn{}, false},
		{"agent policy", true, false, RunIn{Policy: "[paths]\nhidden = [\"/x\"]\n"}, false},
		{"net false without --net", true, false, RunIn{Net: &no}, true},
		{"net true without --net", true, false, RunIn{Net: &yes}, false},
		{"net true with --net", true, true, RunIn{Net: &yes}, true},
		{"net false with --net", true, true, RunIn{Net: &no}, false},
		{"default with --net", true, true, RunIn{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{cfg: Config{Net: Net{Enabled: c.net}}}
			if c.pool {
				s.pool = newWarmPool(s, 1)
			}
			if got := s.warmable(c.in); got != c.want {
				t.Errorf("warmable = %v, want %v", got, c.want)
			}
		})
	}
}
