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

// TestRegionsWatch: watch gives the stretch of a span around a range, at
// most watchAround on either side; a removal, or one about to be made,
// that meets a watched stretch moves rm, one elsewhere does not; past
// watchMax stretches every removal moves it; a range that is not all the
// guest's is not watched.
func TestRegionsWatch(t *testing.T) {
	var r regions
	const lo, hi = 0x100000, 0x900000
	r.add(lo, hi)
	buf := uint64(0x500010)
	s, rm, ok := r.watch(buf, buf+144)
	want := span{0x500000 - watchAround, 0x501000 + watchAround}
	if !ok || s != want || rm != 0 {
		t.Fatalf("watch: %#x, %d, %v; want %#x, 0, true", s, rm, ok, want)
	}
	for _, c := range []struct {
		lo, hi uint64
		moves  bool
	}{
		{lo, lo + 0x1000, false},                   // far below
		{want.hi, want.hi + 0x1000, false},         // just above
		{want.lo - 0x1000, want.lo, false},         // just below
		{want.hi - 0x1000, want.hi + 0x1000, true}, // its last page
		{0x500000, 0x501000, true},                 // the buffer's page
	} {
		before := r.rm.Load()
		r.removing(c.lo, c.hi)
		if moved := r.rm.Load() != before; moved != c.moves {
			t.Errorf("removing [%#x, %#x): moved %v, want %v", c.lo, c.hi, moved, c.moves)
		}
	}
	before := r.rm.Load()
	r.remove(0x500000, 0x501000)
	if r.rm.Load() == before {
		t.Errorf("the removal of the buffer's page did not move rm")
	}
	if _, _, ok := r.watch(0x500000, 0x500090); ok {
		t.Errorf("watched a range that is no longer the guest's")
	}
	// At the span's edge, the stretch ends with the span.
	if s, _, ok := r.watch(lo+8, lo+152); !ok || s.lo != lo || s.hi != lo+0x1000+watchAround {
		t.Errorf("at the span's start: %#x, %v", s, ok)
	}
	// A stretch that meets a watched one joins it: a removal just past
	// the first stretch, within the second, moves rm.
	before = r.rm.Load()
	r.watch(want.hi+0x2000, want.hi+0x2090)
	r.removing(want.hi+0x1000+watchAround, want.hi+0x2000+watchAround)
	if r.rm.Load() == before || len(r.watched) != 2 {
		t.Errorf("a stretch joining the first: rm moved %v, %d watched, want 2", r.rm.Load() != before, len(r.watched))
	}
	// Past watchMax stretches apart, every removal counts.
	for i := range watchMax {
		r.watch(lo+uint64(i+3)*0x40000, lo+uint64(i+3)*0x40000+144)
	}
	before = r.rm.Load()
	r.removing(hi-0x1000, hi)
	if !r.all || r.rm.Load() == before {
		t.Errorf("past %d watched stretches a removal elsewhere did not move rm", watchMax)
	}
}
