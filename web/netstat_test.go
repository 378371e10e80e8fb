package web

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// From LKL's /proc/net with --net.
const lklNetDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     140       2    0    0    0     0          0         0      140       2    0    0    0     0       0          0
  eth0:  123456     789    1    2    0     0          0         0   654321     987    3    4    0     0       0          0
`

const lklSNMP = `Ip: Forwarding DefaultTTL InReceives InHdrErrors
Ip: 2 64 10 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 5 1 2 0 1 700 800 3 0 4 0
Udp: InDatagrams NoPorts InErrors OutDatagrams
Udp: 6 1 0 7
`

func TestParseNetDev(t *testing.T) {
	ifs, err := ParseNetDev([]byte(lklNetDev))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]NetIf{
		"lo":   {RxBytes: 140, RxPackets: 2, TxBytes: 140, TxPackets: 2},
		"eth0": {RxBytes: 123456, RxPackets: 789, RxErrors: 1, RxDropped: 2, TxBytes: 654321, TxPackets: 987, TxErrors: 3, TxDropped: 4},
	}
	if len(ifs) != len(want) {
		t.Fatalf("got %+v", ifs)
	}
	for name, w := range want {
		if ifs[name] != w {
			t.Errorf("%s: %+v, want %+v", name, ifs[name], w)
		}
	}
	for _, bad := range []string{"", "Inter-|\n face |bytes\n", "eth0: 1 2 3\n"} {
		if _, err := ParseNetDev([]byte(bad)); !errors.Is(err, errNoData) {
			t.Errorf("%q: %v, want no data", bad, err)
		}
	}
}

func TestParseSNMP(t *testing.T) {
	m, err := ParseSNMP([]byte(lklSNMP))
	if err != nil {
		t.Fatal(err)
	}
	tcp := m["Tcp"]
	if tcp["ActiveOpens"] != 5 || tcp["PassiveOpens"] != 1 || tcp["InSegs"] != 700 || tcp["OutRsts"] != 4 || tcp["CurrEstab"] != 1 {
		t.Errorf("Tcp %v", tcp)
	}
	if _, ok := tcp["MaxConn"]; ok {
		t.Errorf("MaxConn -1 kept: %v", tcp)
	}
	if m["Udp"]["OutDatagrams"] != 7 || m["Ip"]["InReceives"] != 10 {
		t.Errorf("Udp %v Ip %v", m["Udp"], m["Ip"])
	}
	// A values line without its names line, or of another length, is
	// skipped.
	if m, err := ParseSNMP([]byte("Tcp: 1 2\nUdp: A B\nUdp: 1\n")); err == nil {
		t.Errorf("got %v", m)
	}
}

// TestSamplerNet: the sampler reads net/dev and net/snmp beneath the proc
// root and computes the external byte rates (lo left out).
func TestSamplerNet(t *testing.T) {
	dev := lklNetDev
	files := map[string]*string{"/p/net/dev": &dev}
	snmp := lklSNMP
	files["/p/net/snmp"] = &snmp
	s := NewSampler(SamplerConfig{ProcRoot: "/p", ReadFile: func(p string) ([]byte, error) {
		if f := files[p]; f != nil {
			return []byte(*f), nil
		}
		return nil, errors.New("none")
	}, Recorder: NewRecorder(RecorderConfig{})})
	a := s.SampleNow()
	if !a.Net.Available || a.Net.Interfaces["eth0"].TxBytes != 654321 || a.Net.TCP["ActiveOpens"] != 5 || a.Net.UDP["InDatagrams"] != 6 {
		t.Fatalf("net %+v", a.Net)
	}
	time.Sleep(50 * time.Millisecond)
	dev = strings.Replace(dev, "654321", "754321", 1) // eth0 sent 100000 more
	dev = strings.Replace(dev, "      140       2", "  1000140       2", 1)
	b := s.SampleNow()
	if b.Net.TxBytesPerS <= 0 || b.Net.RxBytesPerS != 0 {
		t.Errorf("rates rx %v tx %v: want tx only (lo is not counted)", b.Net.RxBytesPerS, b.Net.TxBytesPerS)
	}
}
