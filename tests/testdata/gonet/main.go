// gonet is a static Go program for TestNetGoProgram: Go's runtime waits
// for its sockets in epoll, non-blocking, next to its own eventfd, as Go
// servers and clients in a guest do.
//
//	gonet HOST:PORT
//
// It serves HTTP on the guest's loopback and fetches from it with 20
// goroutines at once (20 requests each, kept alive), fetches / from
// HOST:PORT, dials 10.0.2.2:1, which the policy refuses, and lists the
// interfaces (netlink).
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gonet HOST:PORT")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "guest says "+r.URL.Path)
	}))
	c := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				r, err := c.Get(fmt.Sprintf("http://%s/%d-%d", ln.Addr(), i, j))
				if err != nil {
					fmt.Println("loopback get:", err)
					return
				}
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				if string(b) == fmt.Sprintf("guest says /%d-%d", i, j) {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println("loopback requests answered:", ok.Load())
	if r, err := c.Get("http://" + os.Args[1] + "/"); err != nil {
		fmt.Println("host get:", err)
	} else {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		fmt.Printf("host get: %d %s\n", r.StatusCode, b)
	}
	_, err = net.DialTimeout("tcp", "10.0.2.2:1", 5*time.Second)
	fmt.Println("refused dial:", err)
	// The guest's interfaces, through netlink (LKL's).
	ifs, err := net.Interfaces()
	if err != nil {
		fmt.Println("interfaces:", err)
		return
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		fmt.Println("interface", i.Name, i.HardwareAddr, addrs)
	}
}
