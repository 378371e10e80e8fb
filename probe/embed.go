package probe

import (
	"embed"
	"errors"
)

// The guest program, built by the Makefile (musl-gcc -static) into
// bin/kbox-probe before kbox is built. bin/.gitkeep keeps the pattern
// matching when it was not built: kbox then builds, and `kbox probe`
// says what is missing.
//
//go:embed bin/*
var bin embed.FS

// ErrNotBuilt is Program's error when this kbox was built without the
// guest program.
var ErrNotBuilt = errors.New("this kbox was built without the probe program (probe/bin/kbox-probe): build kbox with `make`, which compiles probe/guest/*.c with musl-gcc -static (apt-get install musl-tools)")

// Program returns the guest program's bytes.
func Program() ([]byte, error) {
	b, err := bin.ReadFile("bin/kbox-probe")
	if err != nil || len(b) == 0 {
		return nil, ErrNotBuilt
	}
	return b, nil
}
