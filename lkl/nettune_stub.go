//go:build !lkl

package lkl

// TuneTCP fails without LKL.
func TuneTCP(procDir int) error { return ErrNotBuilt }
