//go:build !linux || !amd64 || !cgo

package trap

import "errors"

// ErrUnsupported says this build has no trap tier.
var ErrUnsupported = errors.New("the trap tier needs linux/amd64 and cgo")

// Available reports whether this build has the trap tier.
func Available() bool { return false }

// Prepare would reserve the guest's fd range.
func Prepare() (int, error) { return 0, ErrUnsupported }

// Run would run the guest in the trap tier.
func Run(cfg Config) (Exit, error) { return Exit{}, ErrUnsupported }

// Die would end kbox with a signal.
func Die(sig int) {}

// Kill would end the guest.
func Kill() {}

// Release would give back the guest's fd range.
func Release() {}

// Sites would report the in-process tier's sites.
func Sites() (SiteStats, bool) { return SiteStats{}, false }
