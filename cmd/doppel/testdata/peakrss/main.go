// Command peakrss runs a command and writes its peak resident set size to
// a file, killing it should its resident memory pass a limit:
//
//	peakrss LIMIT-BYTES OUT-FILE COMMAND [ARG...]
//
// OUT-FILE gets "peak N" or, when the command was killed, "killed N", N in
// bytes. It exits as the command did. The tests run doppel through it
// because getrusage's figure for a child also covers the memory of the
// process that started it, and the test process is large (more so under
// the race detector); this one is small.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: peakrss LIMIT-BYTES OUT-FILE COMMAND [ARG...]")
		os.Exit(2)
	}
	limit, err := strconv.ParseInt(os.Args[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[3], os.Args[4:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	killed := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				killed <- false
				return
			case <-time.After(time.Millisecond):
			}
			if rss(cmd.Process.Pid) > limit {
				_ = cmd.Process.Kill()
				killed <- true
				return
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	word := "peak"
	if <-killed {
		word = "killed"
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // kilobytes on Linux
	if err := os.WriteFile(os.Args[2], fmt.Appendf(nil, "%s %d\n", word, peak), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}

// rss is VmRSS of pid in bytes, 0 once it is gone.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
