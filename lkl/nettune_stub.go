//go:build !lkl

package lkl

// TuneTCP fails without LKL.
func TuneTCP(procDir, memMB int) error { return ErrNotBuilt }
