package sessiondir

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// A frame on a session's socket: an 8-byte head (the JSON's length, then
// the raw bytes' length, each 4 bytes little-endian), the JSON, then the
// raw bytes. A file call's content travels raw: as base64 in the JSON it
// would grow by a third and be scanned at both ends.

// HeadLen is the length of a frame's head.
const HeadLen = 8

// AppendFrame appends the frame of v (JSON) and raw to dst.
func AppendFrame(dst []byte, v any, raw []byte) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(raw)))
	dst = append(dst, b...)
	return append(dst, raw...), nil
}

// ReadBody reads the JSON and the raw bytes of the frame whose head is
// head, refusing a frame of more than max bytes.
func ReadBody(r io.Reader, head [HeadLen]byte, max int) (body, raw []byte, err error) {
	n := int64(binary.LittleEndian.Uint32(head[:4]))
	m := int64(binary.LittleEndian.Uint32(head[4:]))
	if n+m > int64(max) {
		return nil, nil, fmt.Errorf("a frame of %d bytes is above the limit of %d", n+m, max)
	}
	buf := make([]byte, n+m)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, nil, err
	}
	return buf[:n:n], buf[n:], nil
}
