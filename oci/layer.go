package oci

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Layer is one layer of an image: a tar archive, maybe compressed.
type Layer struct {
	// Name says which layer this is, for messages: its number and
	// digest, or the file it is.
	Name string
	// Digest is the blob's digest as stored (compressed), DiffID the
	// digest of the uncompressed tar; "" when the source names none.
	Digest, DiffID string
	// Size is the blob's size as stored, -1 when unknown.
	Size int64
	open func() (io.ReadCloser, error)
}

// LayerReader reads a layer's tar stream, decompressed. Finish reads what
// is left and checks the digests and the size: a layer is not verified
// until Finish returns nil.
type LayerReader struct {
	l       *Layer
	raw     io.ReadCloser
	counted *countingReader
	blob    hash.Hash
	diff    hash.Hash
	dec     io.Reader
	closer  func()
}

type countingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	return n, err
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// Open opens the layer for reading. Gzip and zstd compression are found
// by their magic numbers, whatever the media type says.
func (l *Layer) Open() (*LayerReader, error) {
	raw, err := l.open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.Name, err)
	}
	lr := &LayerReader{l: l, raw: raw, blob: sha256.New(), diff: sha256.New()}
	lr.counted = &countingReader{r: raw, h: lr.blob}
	br := bufio.NewReaderSize(lr.counted, 64<<10)
	head, _ := br.Peek(4)
	var dec io.Reader = br
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		z, err := gzip.NewReader(br)
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("%s: gzip: %w", l.Name, err)
		}
		z.Multistream(true)
		dec = z
	case bytes.HasPrefix(head, zstdMagic):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("%s: zstd: %w", l.Name, err)
		}
		dec, lr.closer = z, z.Close
	}
	lr.dec = io.TeeReader(dec, lr.diff)
	return lr, nil
}

// Read reads the decompressed tar stream.
func (lr *LayerReader) Read(p []byte) (int, error) {
	n, err := lr.dec.Read(p)
	if err != nil && err != io.EOF {
		err = lr.explain(err)
	}
	return n, err
}

func (lr *LayerReader) explain(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: truncated (the data ends early): %w", lr.l.Name, err)
	}
	return fmt.Errorf("%s: %w", lr.l.Name, err)
}

// Finish reads the rest of the layer and checks its size and digests.
func (lr *LayerReader) Finish() error {
	if _, err := io.Copy(io.Discard, lr.dec); err != nil {
		return lr.explain(err)
	}
	// The compressed stream may end before the blob does (padding).
	if _, err := io.Copy(io.Discard, lr.counted); err != nil {
		return lr.explain(err)
	}
	l := lr.l
	if l.Size >= 0 && lr.counted.n != l.Size {
		return fmt.Errorf("%s: %d bytes where %d were announced (truncated or padded)", l.Name, lr.counted.n, l.Size)
	}
	if got := "sha256:" + hex.EncodeToString(lr.blob.Sum(nil)); l.Digest != "" && got != l.Digest {
		return &DigestError{What: l.Name, Want: l.Digest, Got: got}
	}
	if got := "sha256:" + hex.EncodeToString(lr.diff.Sum(nil)); l.DiffID != "" && got != l.DiffID {
		return &DigestError{What: l.Name + " (uncompressed)", Want: l.DiffID, Got: got}
	}
	return nil
}

// Close releases the layer's file or connection.
func (lr *LayerReader) Close() error {
	if lr.closer != nil {
		lr.closer()
	}
	return lr.raw.Close()
}

// DigestError is content whose digest is not the one it was named by.
type DigestError struct{ What, Want, Got string }

func (e *DigestError) Error() string {
	return fmt.Sprintf("%s: digest mismatch: want %s, the data has %s", e.What, e.Want, e.Got)
}

// shortDigest is a digest cut for messages.
func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}
