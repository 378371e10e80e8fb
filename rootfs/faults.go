package rootfs

import (
	"fmt"
	"os"
	"sync"

	"github.com/kbox-project/kbox/lkl"
)

// faultEnv names the test-only fault injection: when set, the image's
// disk answers every request touching these 512-byte sectors
// ("FIRST-LAST[,FIRST-LAST...]") with an I/O error (docs/testing.md). It
// is read once, at the first Setup.
const faultEnv = "KBOX_TEST_DISK_EIO"

var diskFaults = sync.OnceValues(func() ([]lkl.SectorRange, error) {
	v, ok := os.LookupEnv(faultEnv)
	if !ok {
		return nil, nil
	}
	r, err := lkl.ParseSectorRanges(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %v", faultEnv, v, err)
	}
	return r, nil
})
