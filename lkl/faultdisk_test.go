package lkl

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSectorRanges(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []SectorRange
		err  string
	}{
		{"8-15", []SectorRange{{8, 15, FaultReads | FaultWrites}}, ""},
		{"7", []SectorRange{{7, 7, FaultReads | FaultWrites}}, ""},
		{"8-15, r:100-100,w:200", []SectorRange{{8, 15, FaultReads | FaultWrites}, {100, 100, FaultReads}, {200, 200, FaultWrites}}, ""},
		{"x:1-2", nil, "bad sector range"},
		{"w:", nil, "bad sector range"},
		{"", nil, "bad sector range"},
		{"15-8", nil, "bad sector range"},
		{"a-b", nil, "bad sector range"},
		{"8-", nil, "bad sector range"},
		{"-8", nil, "bad sector range"},
		{"1,,2", nil, "bad sector range"},
		{strings.Repeat("1,", 64) + "1", nil, "at most 64"},
	} {
		got, err := ParseSectorRanges(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
}
