package jinja

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/testutil/procmem"
)

// BenchmarkBatchEveryCharacter renders `q | batch(1) | list`, one group
// for every character of q: over 3,000,000 characters it is refused
// before a group is made; over 100,000 (the bound of groups) it renders.
// peak-RSS-MiB is the process's peak resident memory when the benchmark
// ends: run it alone for the figure of one render,
//
//	go test -run '^$' -bench 'BatchEveryCharacter/3M' -benchmem ./internal/jinja/
func BenchmarkBatchEveryCharacter(b *testing.B) {
	tpl, err := Compile(`{{ q | batch(1) | list | length }}`)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		size    int
		refused bool
	}{{"3M", 3_000_000, true}, {"100k", MaxRange, false}} {
		q := strings.Repeat("x", c.size)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				vars := NewVars()
				vars.Set("q", q)
				out, err := tpl.ExecuteToString(vars)
				switch {
				case c.refused && (err == nil || !strings.Contains(err.Error(), "over the bound of 100000")):
					b.Fatalf("rendered %.100q, %v; want the bound of groups", out, err)
				case !c.refused && (err != nil || out != strconv.Itoa(c.size)):
					b.Fatalf("rendered %.100q, %v", out, err)
				}
			}
			peak, _ := procmem.Peak(os.Getpid()) // 0 where /proc does not say
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		})
	}
}
