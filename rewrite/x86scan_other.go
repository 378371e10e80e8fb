//go:build !amd64

package rewrite

// haveRel32Masks: the vector scan is amd64's; elsewhere the text's
// rel32 targets are found by the byte search alone.
var haveRel32Masks = false

func rel32Masks(p *byte, nblocks int, out *uint32) { panic("rel32Masks: amd64 only") }
