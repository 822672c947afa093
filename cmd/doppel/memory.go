package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/jinja"
)

// Environment variables of serve's memory.
const (
	envMemoryLimit  = "GOMEMLIMIT" // Go's own
	envRenderBudget = "DOPPEL_RENDER_BUDGET"
)

// defaultMemoryLimit is serve's soft memory limit when neither GOMEMLIMIT
// nor a cgroup sets one: the garbage collector works harder past it, so
// an unconstrained host keeps Doppel near 1 GiB, and the rendering budget
// at a quarter of it.
const defaultMemoryLimit = 1 << 30

// cgroupShare is the part of a cgroup's memory limit the soft limit takes:
// the rest is for what the Go runtime does not count (the binary's
// mappings, the kernel's buffers for the process).
const cgroupShare = 0.9

// limitMemory sets serve's soft memory limit, unless GOMEMLIMIT is set
// (`off` included): 90% of the cgroup's memory limit when one is readable,
// else defaultMemoryLimit. Then the process-wide rendering budget:
// DOPPEL_RENDER_BUDGET, else a quarter of the memory limit. A malformed
// DOPPEL_RENDER_BUDGET is reported on stderr and the default kept.
func limitMemory(stderr io.Writer) {
	if os.Getenv(envMemoryLimit) == "" {
		limit := int64(defaultMemoryLimit)
		if c, ok := cgroupMemoryLimit("/"); ok {
			limit = int64(float64(c) * cgroupShare)
		}
		debug.SetMemoryLimit(limit)
	}
	budget := jinja.DefaultBudget()
	if v := strings.TrimSpace(os.Getenv(envRenderBudget)); v != "" {
		if n, err := config.ParseByteSize(v); err != nil {
			fmt.Fprintf(stderr, "doppel: %s: %v; the default of %d bytes is used\n", envRenderBudget, err, budget)
		} else {
			budget = int64(n)
		}
	}
	jinja.SetBudget(budget)
}

// cgroupMemoryLimit is the memory limit of the process's cgroup, read
// under root ("/" but in tests): cgroup v2's memory.max of its own cgroup,
// else at the mount's root (as a container sees its own), else cgroup v1's
// memory.limit_in_bytes at the root. No limit ("max", or v1's figure near
// 2⁶³) is not one.
func cgroupMemoryLimit(root string) (int64, bool) {
	mount := filepath.Join(root, "sys/fs/cgroup")
	files := []string{filepath.Join(mount, "memory.max"), filepath.Join(mount, "memory/memory.limit_in_bytes")}
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rel, ok := strings.CutPrefix(line, "0::"); ok && rel != "/" {
				files = append([]string{filepath.Join(mount, rel, "memory.max")}, files...)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0, false // read, and no limit
		}
		return n, true
	}
	return 0, false
}
