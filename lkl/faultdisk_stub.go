//go:build !lkl

package lkl

func diskAddFaulty(int, []uint64) int { return -38 } // ENOSYS

func diskFailed(int) uint64 { return 0 }
