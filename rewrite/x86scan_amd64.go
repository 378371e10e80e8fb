package rewrite

import "golang.org/x/sys/cpu"

// rel32Masks (x86scan_amd64.s) marks, for each of nblocks 32-byte blocks
// at p, the bytes that may start a rel32 branch (E8, E9, 0F 80-8F) as the
// bits of one out word; it reads the byte after the last block too.
//
//go:noescape
func rel32Masks(p *byte, nblocks int, out *uint32)

// haveRel32Masks: rel32Masks needs AVX2.
var haveRel32Masks = cpu.X86.HasAVX2
