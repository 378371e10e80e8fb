package shadowfd

import "github.com/kbox-project/kbox/lkl"

// Warm makes the node of the file open at lklfd (which Warm takes over)
// whose LKL stat is st, unless one exists or is being made: the shadow of
// a file a guest is about to open, made ahead of its open (the libraries
// of a program being executed: dispatch/warm.go). An open of the same
// inode meanwhile waits for it and then finds the node. Errors are
// dropped: the guest's own open then takes the general path.
func (m *Manager) Warm(lklfd int, st *lkl.Stat64, path string) {
	k := nodeKey{st.Dev, st.Ino}
	m.mu.Lock()
	if m.nodes[k] != nil || m.warming[k] != nil || m.closed.Load() {
		m.mu.Unlock()
		lkl.Close(lklfd)
		return
	}
	if m.warming == nil {
		m.warming = map[nodeKey]chan struct{}{}
	}
	ch := make(chan struct{})
	m.warming[k] = ch
	m.warmN.Add(1)
	m.mu.Unlock()

	var n *Node
	var err error
	lkl.AsRoot(func() { n, err = m.newNode(k, lklfd, st, path) })

	m.mu.Lock()
	delete(m.warming, k)
	m.warmN.Add(-1)
	m.mu.Unlock()
	close(ch)
	if err != nil {
		lkl.Close(lklfd) // still Warm's on an error
		return
	}
	m.done(n)
}

// waitWarms waits for every Warm under way (Close: none starts once
// closed is set, which Warm reads under mu).
func (m *Manager) waitWarms() {
	m.mu.Lock()
	chans := make([]chan struct{}, 0, len(m.warming))
	for _, ch := range m.warming {
		chans = append(chans, ch)
	}
	m.mu.Unlock()
	for _, ch := range chans {
		<-ch
	}
}

// waitWarm waits while Warm makes the node of k. One atomic load when
// nothing is being made (the open path's case).
func (m *Manager) waitWarm(k nodeKey) {
	if m.warmN.Load() == 0 {
		return
	}
	m.mu.Lock()
	ch := m.warming[k]
	m.mu.Unlock()
	if ch != nil {
		<-ch
	}
}
