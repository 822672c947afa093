package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/jinja"
)

// TestCgroupMemoryLimit reads the limits of cgroup v2 (the process's own
// cgroup first) and v1 from a made-up tree; no limit is none.
func TestCgroupMemoryLimit(t *testing.T) {
	tree := func(files map[string]string) string {
		root := t.TempDir()
		for name, content := range files {
			path := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2, own cgroup", map[string]string{
			"proc/self/cgroup": "0::/system.slice/doppel.service\n",
			"sys/fs/cgroup/system.slice/doppel.service/memory.max": "536870912\n",
			"sys/fs/cgroup/memory.max":                             "999999999\n",
		}, 512 << 20},
		{"v2, a container's root", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "268435456\n",
		}, 256 << 20},
		{"v2, own cgroup elsewhere", map[string]string{
			"proc/self/cgroup":         "0::/kubepods/pod1/abc\n",
			"sys/fs/cgroup/memory.max": "268435456\n",
		}, 256 << 20},
		{"v2, no limit", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v1", map[string]string{
			"proc/self/cgroup":                           "4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "134217728\n",
		}, 128 << 20},
		{"v1, no limit", map[string]string{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"nothing readable", nil, 0},
	} {
		got, ok := cgroupMemoryLimit(tree(c.files))
		if got != c.want || ok != (c.want != 0) {
			t.Errorf("%s: %d %v, want %d", c.name, got, ok, c.want)
		}
	}
}

// TestServeMemoryLimits: without GOMEMLIMIT, serve sets a soft limit (90%
// of the cgroup's, else 1 GiB) and a rendering budget of a quarter of it;
// GOMEMLIMIT is left alone; DOPPEL_RENDER_BUDGET sets the budget, and a
// malformed one is a usage error.
func TestServeMemoryLimits(t *testing.T) {
	oldLimit := debug.SetMemoryLimit(-1)
	oldBudget, _ := jinja.Budget()
	t.Cleanup(func() {
		debug.SetMemoryLimit(oldLimit)
		jinja.SetBudget(oldBudget)
	})
	want := int64(defaultMemoryLimit)
	if c, ok := cgroupMemoryLimit("/"); ok {
		want = int64(float64(c) * cgroupShare)
	}
	for _, c := range []struct {
		name, gomemlimit, budget string
		set                      int64 // the limit the runtime took from GOMEMLIMIT
		wantLimit, wantBudget    int64
		refused                  bool
	}{
		{"defaults", "", "", 0, want, want / 4, false},
		{"GOMEMLIMIT", "300MiB", "", 300 << 20, 300 << 20, 75 << 20, false},
		{"budget", "", "8MiB", 0, want, 8 << 20, false},
		{"budget in bytes", "300MiB", "1000000", 300 << 20, 300 << 20, 1_000_000, false},
		{"malformed budget", "", "8M", 0, want, want / 4, true},
	} {
		t.Setenv(envMemoryLimit, c.gomemlimit)
		t.Setenv(envRenderBudget, c.budget)
		if c.set != 0 {
			debug.SetMemoryLimit(c.set)
		} else {
			debug.SetMemoryLimit(123 << 20) // not what serve should set
		}
		fromEnv, err := renderBudgetFromEnv()
		if refused := err != nil; refused != c.refused {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), envRenderBudget) {
				t.Errorf("%s: not a usage error naming %s: %v", c.name, envRenderBudget, err)
			}
		}
		gotLimit, gotBudget := limitMemory(fromEnv)
		limit := debug.SetMemoryLimit(-1)
		budget, _ := jinja.Budget()
		if limit != c.wantLimit || budget != c.wantBudget || gotLimit != limit || gotBudget != budget {
			t.Errorf("%s: memory limit %d, budget %d; want %d, %d", c.name, limit, budget, c.wantLimit, c.wantBudget)
		}
	}
}
