//go:build !cgo || !(amd64 || arm64)

package nativerun

import "errors"

// Start needs cgo: a loaded program never runs on a Go thread.
func Start(entry, sp uintptr) error {
	return errors.New("nativerun: built without cgo")
}
