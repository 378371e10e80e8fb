// gospawn is a static Go program for TestAutoGoSpawner: it starts
// processes with os/exec (Go's own clone and execve, not libc's) and
// checks what they print.
//
//	gospawn N
//
// It runs /bin/echo N times, then a shell pipeline, and prints
// "gospawn ok N" and the pipeline's output.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

func main() {
	n, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if len(os.Args) != 2 || err != nil {
		fmt.Fprintln(os.Stderr, "usage: gospawn N")
		os.Exit(2)
	}
	for i := 0; i < n; i++ {
		out, err := exec.Command("/bin/echo", "x"+strconv.Itoa(i)).Output()
		if err != nil || strings.TrimSpace(string(out)) != "x"+strconv.Itoa(i) {
			fmt.Printf("gospawn FAIL: spawn %d: %q %v\n", i, out, err)
			os.Exit(1)
		}
	}
	out, err := exec.Command("/bin/sh", "-c", "echo a b c | wc -w").Output()
	if err != nil {
		fmt.Printf("gospawn FAIL: sh: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("gospawn ok %d, pipeline %s\n", n, strings.TrimSpace(string(out)))
}
