//go:build !lkl

package lkl

// Available reports whether this binary links liblkl.
const Available = false

// APIGeneration reports which LKL entry points the linked liblkl has; 0 when
// built without LKL.
func APIGeneration() int { return 0 }

func boot(string, bool) error { return ErrNotBuilt }

func shutdown() {}

func hugeRest() int64 { return -1 }

func setStarting(bool) {}

func markRestarted() {}

func panicKernel() {}

func diskAdd(int) int { return -38 } // ENOSYS

func mountDev(int, int, string, uintptr, string) (string, error) { return "", ErrNotBuilt }

func diskRemove(int) int { return -38 } // ENOSYS

func hurry(int64) {}

func umountDev(int, int, int) int { return -38 } // ENOSYS

func blockDev(int, int) (uint64, int) { return 0, -38 } // ENOSYS

func syscall6(_, _, _, _, _, _, _ int64) int64 { return -38 } // ENOSYS
