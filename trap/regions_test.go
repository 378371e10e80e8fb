//go:build linux

package trap

import (
	"reflect"
	"testing"
)

func TestRegions(t *testing.T) {
	type op struct {
		add    bool
		lo, hi uint64
	}
	for _, c := range []struct {
		name string
		ops  []op
		want []span
	}{
		{"one", []op{{true, 0x1000, 0x3000}}, []span{{0x1000, 0x3000}}},
		{"adjacent merge", []op{{true, 0x1000, 0x2000}, {true, 0x2000, 0x3000}}, []span{{0x1000, 0x3000}}},
		{"overlap merge", []op{{true, 0x1000, 0x4000}, {true, 0x2000, 0x6000}}, []span{{0x1000, 0x6000}}},
		{"disjoint sorted", []op{{true, 0x8000, 0x9000}, {true, 0x1000, 0x2000}}, []span{{0x1000, 0x2000}, {0x8000, 0x9000}}},
		{"bridge", []op{{true, 0x1000, 0x2000}, {true, 0x3000, 0x4000}, {true, 0x2000, 0x3000}}, []span{{0x1000, 0x4000}}},
		{"hole punched", []op{{true, 0x1000, 0x5000}, {false, 0x2000, 0x3000}}, []span{{0x1000, 0x2000}, {0x3000, 0x5000}}},
		{"remove across", []op{{true, 0x1000, 0x2000}, {true, 0x3000, 0x4000}, {false, 0x1800, 0x3800}}, []span{{0x1000, 0x1800}, {0x3800, 0x4000}}},
		{"remove all", []op{{true, 0x1000, 0x2000}, {false, 0, 0x10000}}, []span{}},
		{"empty add ignored", []op{{true, 0x2000, 0x2000}}, []span{}},
	} {
		var r regions
		for _, o := range c.ops {
			if o.add {
				r.add(o.lo, o.hi)
			} else {
				r.remove(o.lo, o.hi)
			}
		}
		got := r.list()
		if got == nil {
			got = []span{}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %x, want %x", c.name, got, c.want)
		}
	}
}

func TestRegionsContains(t *testing.T) {
	var r regions
	r.add(0x1000, 0x3000)
	r.add(0x5000, 0x6000)
	for _, c := range []struct {
		lo, hi uint64
		want   bool
	}{
		{0x1000, 0x3000, true},
		{0x2000, 0x2800, true},
		{0x0, 0x1000, false},    // below
		{0x2000, 0x4000, false}, // runs past the end
		{0x3000, 0x5000, false}, // the gap
		{0x1000, 0x6000, false}, // over the gap
		{0x5000, 0x6000, true},  // the second
		{0x5800, 0x5800, true},  // empty, inside
		{0x4000, 0x4000, false}, // empty, in the gap
		{0x2000, 0x1000, false}, // reversed
		{0x6000, 0x7000, false}, // just after
	} {
		if got := r.contains(c.lo, c.hi); got != c.want {
			t.Errorf("contains(%#x, %#x) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}
