// gothreads is a multi-threaded Go guest program: G goroutines on
// GOMAXPROCS OS threads each write, read back and stat files of their own
// in a directory, hand values over channels and check every result. The
// Go runtime adds its own threads, signals (preemption) and futexes.
// Usage: gothreads DIR G N. Prints "gothreads ok G*N".
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gothreads DIR G N")
		os.Exit(2)
	}
	dir := os.Args[1]
	g, _ := strconv.Atoi(os.Args[2])
	n, _ := strconv.Atoi(os.Args[3])
	if g <= 0 || n <= 0 {
		fmt.Fprintln(os.Stderr, "gothreads: G and N must be positive")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(4)
	results := make(chan error, g)
	var done sync.WaitGroup
	var total int64
	var mu sync.Mutex
	for i := 0; i < g; i++ {
		done.Add(1)
		go func(i int) {
			defer done.Done()
			path := filepath.Join(dir, fmt.Sprintf("go.%d", i))
			for r := 0; r < n; r++ {
				want := []byte(fmt.Sprintf("goroutine %d round %d %s\n", i, r, bytes.Repeat([]byte{'x'}, r%512)))
				if err := os.WriteFile(path, want, 0o644); err != nil {
					results <- err
					return
				}
				got, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(got, want) {
					results <- fmt.Errorf("goroutine %d round %d: read back %q, %v", i, r, got, err)
					return
				}
				if st, err := os.Stat(path); err != nil || st.Size() != int64(len(want)) {
					results <- fmt.Errorf("goroutine %d round %d: stat %v", i, r, err)
					return
				}
				runtime.Gosched()
				mu.Lock()
				total++
				mu.Unlock()
			}
			results <- os.Remove(path)
		}(i)
	}
	done.Wait()
	close(results)
	for err := range results {
		if err != nil {
			fmt.Println("gothreads FAIL:", err)
			os.Exit(1)
		}
	}
	if total != int64(g*n) {
		fmt.Printf("gothreads FAIL: %d rounds, want %d\n", total, g*n)
		os.Exit(1)
	}
	fmt.Printf("gothreads ok %d\n", total)
}
