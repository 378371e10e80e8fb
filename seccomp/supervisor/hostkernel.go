package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// minKernel is the oldest host kernel the seccomp tier can serve a guest
// on: it installs files in the guest and answers in one step with
// SECCOMP_ADDFD_FLAG_SEND (Linux 5.14). Newer features (killable waits,
// 5.19; the fast wake-up, 6.6) are optional.
var minKernel = [2]int{5, 14}

// kernelReleaseEnv, for tests only, stands in for the host's release.
const kernelReleaseEnv = "KBOX_TEST_KERNEL_RELEASE"

// checkHostKernel refuses, in one line naming the fix, a host kernel too
// old for the seccomp tier. A release it cannot parse passes.
func checkHostKernel() error {
	rel := os.Getenv(kernelReleaseEnv)
	if rel == "" {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return nil
		}
		rel = unix.ByteSliceToString(u.Release[:])
	}
	if tooOld(rel) {
		return fmt.Errorf("the seccomp tier needs Linux %d.%d or later (SECCOMP_ADDFD_FLAG_SEND); this host runs %s: upgrade the host kernel", minKernel[0], minKernel[1], rel)
	}
	return nil
}

// tooOld reports whether release ("6.1.0-18-amd64", "5.10.0") is older
// than minKernel; false when it cannot tell.
func tooOld(release string) bool {
	f := strings.SplitN(release, ".", 3)
	if len(f) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(f[0])
	minorDigits := f[1]
	if i := strings.IndexFunc(f[1], func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorDigits = f[1][:i]
	}
	minor, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil {
		return false
	}
	return major < minKernel[0] || major == minKernel[0] && minor < minKernel[1]
}
