// Package procmem reads a process's memory from /proc, for tests that
// bound what Doppel holds: its resident memory now (VmRSS) and its peak
// (VmHWM), as Linux counts them.
//
// It is imported only by tests; nothing in the product links it.
package procmem

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Need skips t where there is no /proc to read.
func Need(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
}

// Resident is pid's resident memory now (VmRSS), in bytes.
func Resident(pid int) (int64, error) { return read(pid, "VmRSS") }

// Peak is the most resident memory pid has had (VmHWM), in bytes.
func Peak(pid int) (int64, error) { return read(pid, "VmHWM") }

// MustResident is Resident, failing t where /proc does not say.
func MustResident(t testing.TB, pid int) int64 {
	t.Helper()
	n, err := Resident(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// MustPeak is Peak, failing t where /proc does not say.
func MustPeak(t testing.TB, pid int) int64 {
	t.Helper()
	n, err := Peak(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// read is field of /proc/pid/status, a line such as "VmRSS:  12345 kB",
// in bytes.
func read(pid int, field string) (int64, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(l, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: cannot read %q", path, l)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: cannot read %q", path, l)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}
