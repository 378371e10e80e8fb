package rootfs

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kbox-project/kbox/oci"
)

// An imported image's configuration (oci.Config) is kept in the image
// file itself, after the end of the filesystem: a JSON object, then its
// length (8 bytes, little-endian), then configMagic. It travels with the
// file when it is copied, and no guest can see it, since it is in no
// file of the filesystem (the guest never sees the disk itself). A tool
// that grows the filesystem (resize2fs) overwrites it; the image then
// runs with kbox's own defaults.

const configMagic = "KBOXCFG1"

// configMax bounds the configuration read back.
const configMax = 1 << 20

// WriteImageConfig appends c after the end of the image file f.
func WriteImageConfig(f *os.File, c *oci.Config) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(b)))
	b = append(b, configMagic...)
	_, err = f.WriteAt(b, end)
	return err
}

// ReadImageConfig reads the configuration an import left in the image at
// path: nil when there is none, and when the file cannot be opened
// (OpenImage says why, with the fix).
func ReadImageConfig(path string) (*oci.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, err
	}
	size := fi.Size()
	var tail [16]byte
	if size < int64(len(tail)) {
		return nil, nil
	}
	if _, err := f.ReadAt(tail[:], size-16); err != nil {
		return nil, err
	}
	if !bytes.Equal(tail[8:], []byte(configMagic)) {
		return nil, nil
	}
	n := int64(binary.LittleEndian.Uint64(tail[:8]))
	fsEnd, err := filesystemEnd(f)
	if err != nil {
		return nil, err
	}
	start := size - 16 - n
	if n < 0 || n > configMax || start < fsEnd {
		return nil, &ImageError{Path: path, Msg: "its image configuration (after the filesystem) is damaged"}
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, start); err != nil {
		return nil, err
	}
	var c oci.Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, &ImageError{Path: path, Msg: "its image configuration (after the filesystem) is damaged", Err: err}
	}
	return &c, nil
}

// filesystemEnd is the byte where the ext filesystem in f ends.
func filesystemEnd(f *os.File) (int64, error) {
	var sb [1024]byte
	if _, err := f.ReadAt(sb[:], extSuperOffset); err != nil {
		return 0, err
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != extMagic {
		return 0, errors.New("not an ext filesystem")
	}
	blocks := uint64(le.Uint32(sb[0x4:]))
	if le.Uint32(sb[0x60:])&extIncompat64Bit != 0 {
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	logBlock := le.Uint32(sb[0x18:])
	if logBlock > 6 {
		return 0, fmt.Errorf("corrupt superblock")
	}
	return int64(blocks << (10 + logBlock)), nil
}
