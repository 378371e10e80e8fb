package sessiondir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// The client side of a session's socket (cmd/kbox/serve.go), in frames
// (frame.go): a run's request carries its stdin, stdout and stderr as
// three fds with its first bytes, and its answer may be preceded by a
// frame saying it started.

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
// the answer's JSON and raw bytes; a run's started frame goes to onStart.
// Closing the connection early (ctx ending) kills a run.
func Call(ctx context.Context, sock string, req any, fds []int, onStart func(pid int)) (body, raw []byte, err error) {
	c, err := Dial(ctx, sock)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	return c.call(ctx, req, fds, onStart)
}

// Conn is a connection to a session's socket that carries one request
// after another (file calls): a call on it saves the dial and the
// server's accept, about 0.1 ms of a 4 KB read_file. A Conn serves one
// call at a time; after an error it is closed and a new one is needed.
type Conn struct {
	uc     *net.UnixConn
	broken bool
}

// Dial connects to the session's socket sock.
func Dial(ctx context.Context, sock string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, &ConnError{err}
	}
	return &Conn{uc: c.(*net.UnixConn)}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.uc.Close() }

// Broken says whether a call failed on c, which is then closed.
func (c *Conn) Broken() bool { return c.broken }

// Call sends req (JSON, a request without fds) and returns the answer's
// JSON and raw bytes.
func (c *Conn) Call(ctx context.Context, req any) (body, raw []byte, err error) {
	body, raw, err = c.call(ctx, req, nil, nil)
	if err != nil {
		c.broken = true
	}
	if c.broken {
		c.uc.Close()
	}
	return body, raw, err
}

// maxAnswer bounds an answer's frame: a 16 MiB read and its JSON.
const maxAnswer = 64 << 20

func (c *Conn) call(ctx context.Context, req any, fds []int, onStart func(pid int)) ([]byte, []byte, error) {
	frame, err := AppendFrame(nil, req, nil)
	if err != nil {
		return nil, nil, err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.uc.WriteMsgUnix(frame, oob, nil); err != nil {
		return nil, nil, &ConnError{err}
	}
	stop := context.AfterFunc(ctx, func() { c.uc.Close() })
	defer func() {
		if !stop() {
			c.broken = true // ctx closed the connection, if only just now
		}
	}()
	for {
		var head [HeadLen]byte
		if _, err := io.ReadFull(c.uc, head[:]); err != nil {
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("%w: %v", ErrCancelled, ctx.Err())
			}
			return nil, nil, &ConnError{err}
		}
		body, raw, err := ReadBody(c.uc, head, maxAnswer)
		if err != nil {
			return nil, nil, &ConnError{err}
		}
		if len(fds) == 0 {
			return body, raw, nil // not a run: no started frame
		}
		var s started
		if err := json.Unmarshal(body, &s); err != nil {
			return nil, nil, fmt.Errorf("the session's kernel answered badly: %v", err)
		}
		if !s.Started {
			return body, raw, nil
		}
		if onStart != nil {
			onStart(s.Pid)
		}
	}
}
