package supervisor

// The C constructor in guestinit.c runs in every process of this binary
// and does nothing unless KBOX_GUEST_INIT=1; this import links it in.

// #cgo CFLAGS: -O2 -Wall
import "C"
