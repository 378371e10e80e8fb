package sessiondir

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// The client side of a session's socket (cmd/kbox/serve.go): a frame is
// a 4-byte length (little-endian) and that many bytes of JSON; a run's
// request carries its stdin, stdout and stderr as three fds with its
// first bytes, and its answer may be preceded by a frame saying it
// started.

// ConnError is a failure of the connection itself: the session's kbox
// has gone (or is going), or never answered.
type ConnError struct{ Err error }

func (e *ConnError) Error() string { return e.Err.Error() }
func (e *ConnError) Unwrap() error { return e.Err }

// ErrCancelled is Call's error when ctx ended the call.
var ErrCancelled = errors.New("the call was cancelled")

// started is what Call reads of every frame: a run's first frame says it
// started, with its pid.
type started struct {
	Started bool `json:"started"`
	Pid     int  `json:"pid"`
}

// Call sends req (JSON) with fds to the session's socket sock and returns
// the answer's JSON; a run's started frame goes to onStart. Closing the
// connection early (ctx ending) kills a run.
func Call(ctx context.Context, sock string, req any, fds []int, onStart func(pid int)) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, &ConnError{err}
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(b)))
	frame = append(frame, b...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := uc.WriteMsgUnix(frame, oob, nil); err != nil {
		return nil, &ConnError{err}
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	for {
		var head [4]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %v", ErrCancelled, ctx.Err())
			}
			return nil, &ConnError{err}
		}
		body := make([]byte, binary.LittleEndian.Uint32(head[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return nil, &ConnError{err}
		}
		var s started
		if err := json.Unmarshal(body, &s); err != nil {
			return nil, fmt.Errorf("the session's kernel answered badly: %v", err)
		}
		if !s.Started {
			return body, nil
		}
		if onStart != nil {
			onStart(s.Pid)
		}
	}
}
