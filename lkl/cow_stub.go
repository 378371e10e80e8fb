//go:build !lkl

package lkl

// COWMap is a copy-on-write disk's dirty-block bitmap.
type COWMap struct {
	b    []byte
	size int64
}

// NewCOWMap allocates the zeroed map of a disk of size bytes.
func NewCOWMap(size int64) *COWMap {
	return &COWMap{b: make([]byte, (size+COWBlock*8-1)/(COWBlock*8)+1), size: size}
}

func (m *COWMap) bytes() []byte { return m.b }

// Free releases the map.
func (m *COWMap) Free() {}

func diskAddCOW(int, int64, []COWLayer) int { return -38 } // ENOSYS

func diskPushCOW(int, int, *COWMap) int { return -38 }

func diskCOWRun(int, int64, int64) (int, int64) { return -1, 0 }
