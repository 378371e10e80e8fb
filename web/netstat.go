package web

import (
	"bytes"
	"strings"
)

// NetIf is one interface's line of /proc/net/dev.
type NetIf struct {
	RxBytes   uint64 `json:"rx_bytes"`
	RxPackets uint64 `json:"rx_packets"`
	RxErrors  uint64 `json:"rx_errors"`
	RxDropped uint64 `json:"rx_dropped"`
	TxBytes   uint64 `json:"tx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxErrors  uint64 `json:"tx_errors"`
	TxDropped uint64 `json:"tx_dropped"`
}

// NetSnapshot is the guest kernel's network counters: its /proc/net/dev
// and the Ip, Tcp and Udp lines of its /proc/net/snmp (the kernel's own
// names: ActiveOpens, InSegs, OutRsts, InDatagrams, ...).
type NetSnapshot struct {
	Available  bool             `json:"available"` // false if /proc/net/dev could not be read
	Interfaces map[string]NetIf `json:"interfaces"`
	// RxBytesPerS and TxBytesPerS are the rates over every interface
	// but lo.
	RxBytesPerS float64           `json:"rx_bytes_per_s"`
	TxBytesPerS float64           `json:"tx_bytes_per_s"`
	IP          map[string]uint64 `json:"ip"`
	TCP         map[string]uint64 `json:"tcp"`
	UDP         map[string]uint64 `json:"udp"`
}

// external sums the byte counters of every interface but lo.
func (n *NetSnapshot) external() (rx, tx uint64) {
	for name, i := range n.Interfaces {
		if name != "lo" {
			rx += i.RxBytes
			tx += i.TxBytes
		}
	}
	return rx, tx
}

// ParseNetDev parses /proc/net/dev: "NAME: rx_bytes rx_packets errs drop
// fifo frame compressed multicast tx_bytes tx_packets errs drop ...".
func ParseNetDev(b []byte) (map[string]NetIf, error) {
	out := map[string]NetIf{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 12 {
			continue
		}
		var v [12]uint64
		good := true
		for i := range v {
			if v[i], ok = parseU(f[i]); !ok {
				good = false
			}
		}
		if !good {
			continue // a header line
		}
		out[string(bytes.TrimSpace(name))] = NetIf{RxBytes: v[0], RxPackets: v[1], RxErrors: v[2], RxDropped: v[3],
			TxBytes: v[8], TxPackets: v[9], TxErrors: v[10], TxDropped: v[11]}
	}
	if len(out) == 0 {
		return nil, errNoData
	}
	return out, nil
}

// ParseSNMP parses /proc/net/snmp: for each protocol a line of names and
// a line of values, each starting with "Proto:". It returns the values by
// protocol and name (negative values, such as Tcp's MaxConn -1, are left
// out).
func ParseSNMP(b []byte) (map[string]map[string]uint64, error) {
	out := map[string]map[string]uint64{}
	var names [][]byte
	var proto string
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) < 2 || !bytes.HasSuffix(f[0], []byte(":")) {
			continue
		}
		p := strings.TrimSuffix(string(f[0]), ":")
		if _, isNum := parseU(f[1]); !isNum && !bytes.HasPrefix(f[1], []byte("-")) {
			names, proto = f[1:], p
			continue
		}
		if p != proto || len(f)-1 != len(names) {
			continue
		}
		m := map[string]uint64{}
		for i, name := range names {
			if v, ok := parseU(f[i+1]); ok {
				m[string(name)] = v
			}
		}
		out[p] = m
		names, proto = nil, ""
	}
	if len(out) == 0 {
		return nil, errNoData
	}
	return out, nil
}
