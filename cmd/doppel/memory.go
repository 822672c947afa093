package main

import (
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

// renderBudgetFromEnv reads DOPPEL_RENDER_BUDGET: 0 when unset (the
// default applies), a usage error when it is not a byte size.
func renderBudgetFromEnv() (int64, error) {
	v := strings.TrimSpace(os.Getenv(envRenderBudget))
	if v == "" {
		return 0, nil
	}
	n, err := config.ParseBytes(v)
	if err != nil {
		return 0, usage("%s: %v", envRenderBudget, err)
	}
	if n < 1 {
		return 0, usage("%s: %s would refuse every render; give at least 1 byte, as a byte size such as 256Mi", envRenderBudget, v)
	}
	return n, nil
}

// limitMemory sets serve's soft memory limit, unless GOMEMLIMIT is set
// (`off` included): 90% of the cgroup's memory limit when one is readable,
// else defaultMemoryLimit. Then the process-wide rendering budget: budget
// (DOPPEL_RENDER_BUDGET) when not 0, else a quarter of the memory limit.
// It returns both, for the startup line.
func limitMemory(budget int64) (memoryLimit, renderBudget int64) {
	if os.Getenv(envMemoryLimit) == "" {
		limit := int64(defaultMemoryLimit)
		if c, ok := cgroupMemoryLimit("/"); ok {
			limit = int64(float64(c) * cgroupShare)
		}
		debug.SetMemoryLimit(limit)
	}
	if budget == 0 {
		budget = jinja.DefaultBudget()
	}
	jinja.SetBudget(budget)
	return debug.SetMemoryLimit(-1), budget
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
