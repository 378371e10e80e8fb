// Package hostproc reads files of the host's /proc for kbox: small
// files read whole, with plain system calls. os.ReadFile takes ten calls
// for one (its file tries Go's poller first: two fcntls, an epoll_ctl
// that procfs refuses, two fcntls back, then fstat, two reads, close)
// where four do: on a 2-vCPU VM under PVM, whose system calls cost
// microseconds, half the time for /proc/self/stat. kbox reads such files
// for every new guest process and every exec.
package hostproc

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// Read returns the whole content of the file at path.
func Read(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 1024)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// Field returns the value of the "key:\tvalue" line of a status file
// (/proc/PID/status), spaces trimmed, and whether there is one.
func Field(status []byte, key string) (string, bool) {
	for len(status) > 0 {
		line := status
		if i := bytes.IndexByte(status, '\n'); i >= 0 {
			line, status = status[:i], status[i+1:]
		} else {
			status = nil
		}
		if k, v, ok := bytes.Cut(line, []byte{':'}); ok && string(k) == key {
			return string(bytes.TrimSpace(v)), true
		}
	}
	return "", false
}
