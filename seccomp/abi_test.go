//go:build linux

package seccomp

import (
	"testing"
	"unsafe"
)

func TestABISizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"SeccompData", unsafe.Sizeof(SeccompData{}), SizeofSeccompData},
		{"Notif", unsafe.Sizeof(Notif{}), SizeofNotif},
		{"NotifResp", unsafe.Sizeof(NotifResp{}), SizeofNotifResp},
		{"NotifAddfd", unsafe.Sizeof(NotifAddfd{}), SizeofNotifAddfd},
		{"NotifSizes", unsafe.Sizeof(NotifSizes{}), 6},
		{"Notif.Data offset", unsafe.Offsetof(Notif{}.Data), 16},
		{"SeccompData.Args offset", unsafe.Offsetof(SeccompData{}.Args), offArgs},
	} {
		if c.got != c.want {
			t.Errorf("%s: size/offset %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestABIMatchesKernel(t *testing.T) {
	s, err := GetNotifSizes()
	if err != nil {
		t.Skipf("SECCOMP_GET_NOTIF_SIZES unavailable: %v", err)
	}
	if int(s.Notif) != SizeofNotif || int(s.NotifResp) != SizeofNotifResp || int(s.Data) != SizeofSeccompData {
		t.Fatalf("kernel sizes %+v, ours notif=%d resp=%d data=%d", s, SizeofNotif, SizeofNotifResp, SizeofSeccompData)
	}
	t.Logf("kernel notif sizes: %+v", s)
}
